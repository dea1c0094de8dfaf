"""Governance stamps on the pool's clock, beside a cluster that runs ahead of the wall clock.

A simulated cluster (the demo: an hour a minute) stamps its workloads, cycles and usage with
its own clock (``control.clock.pool_now``). A what-if run stamped with the wall clock
showed "finished" a day before the window it replayed; a quota change applied from a request
(or set by an admin) entered the quota history on the wall clock, so the reports placed it
about a day early, before the usage it was made beside; a budget grant went into the ledger
a day before the loop's own entries of the same moment.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from domain_builders import (
    flavor,
    node,
    period_fields,
    priority_class,
    queue,
    quota,
    tenant,
    this_month,
    user,
)
from rest_framework.test import APIClient

from gpupool.accounting.rollup import Histories, microseconds
from gpupool.control.choices import CycleStatus
from gpupool.control.models import SchedulingCycle
from gpupool.quotas import whatif
from gpupool.quotas.actions import (
    do_approve_and_apply_quota_request,
    do_create_quota_request,
    do_delete_queue_quota,
    do_start_what_if,
)
from gpupool.quotas.choices import LedgerEntryKind
from gpupool.quotas.models import (
    BudgetLedgerEntry,
    PriorityBudget,
    QueueQuota,
    QueueQuotaChange,
    QuotaRequest,
    WhatIfRun,
)

pytestmark = pytest.mark.django_db

AHEAD = timedelta(days=1)


@pytest.fixture
def world() -> dict[str, Any]:
    """Tenant nlp (lead ``lead``) with queue nlp (4 / 8 / 16 of 32 h100 GPUs), admin ``ada``."""
    h100 = flavor("h100")
    for index in range(4):
        node(f"n{index}", h100, gpus=8)
    lead, admin = user("lead"), user("ada", admin=True)
    team = tenant("nlp", lead=lead)
    team_queue = queue("nlp", parent=queue("root"), tenant=team)
    quota(team_queue, h100, 4, 8, 16)
    priority_class("normal", default=True)
    return {
        "h100": h100,
        "lead": lead,
        "admin": admin,
        "team": team,
        "queue": team_queue,
        "high": priority_class("high", value=100, budget_rate=Decimal(1)),
    }


def cluster_ahead() -> datetime:
    """A finished cycle whose cluster read the wall clock plus a day: the pool's clock."""
    wall = timezone.now()
    cycle = SchedulingCycle.objects.create(
        started_at=wall, finished_at=wall, status=CycleStatus.SUCCEEDED, cluster_at=wall + AHEAD
    )
    assert cycle.cluster_at is not None
    return cycle.cluster_at


def quota_request(world: dict[str, Any], **payload: int) -> QuotaRequest:
    return do_create_quota_request(
        kind="queue-quota",
        tenant=world["team"],
        requested_by=world["lead"],
        justification="the new model needs more",
        payload=payload or {"guarantee": 8, "deserved": 12, "capability": 24},
        queue=world["queue"],
        flavor=world["h100"],
        submit=True,
    )


def budget_request(world: dict[str, Any], pool_clock: datetime) -> QuotaRequest:
    """A submitted budget request for the month the pool's clock is in."""
    start, end = this_month(timezone.localdate(pool_clock))
    return do_create_quota_request(
        kind="budget",
        tenant=world["team"],
        requested_by=world["lead"],
        justification="deadline this month",
        payload={"gpu_hours": 200},
        priority_class=world["high"],
        period_start=start,
        period_end=end,
        submit=True,
    )


def admin_api(world: dict[str, Any]) -> APIClient:
    client = APIClient()
    client.force_authenticate(world["admin"])
    return client


# ----------------------------------------------------------------------------- what-if


def test_a_what_if_run_and_its_window_are_stamped_on_the_pools_clock(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a cluster a day ahead of the wall clock and a submitted queue-quota request
    pool_clock = cluster_ahead()
    request = quota_request(world)
    monkeypatch.setattr(whatif, "dispatch_what_if", lambda run_id: None)
    run = do_start_what_if(request, acting_user=world["admin"], days=2)
    # when the background runs the what-if
    done = whatif.run_what_if(run.pk)
    # then its start and finish are on the pool's clock, as is the window it replayed,
    # which ends at the run's start
    assert done is not None and done.state == "succeeded", done and done.error
    assert done.started_at is not None and done.finished_at is not None
    assert pool_clock <= done.started_at <= done.finished_at
    assert done.result is not None
    assert parse_datetime(done.result["window_end"]) == done.started_at
    assert parse_datetime(done.result["window_start"]) == done.started_at - timedelta(days=2)
    # and the run's age, which frees a lost run after 30 minutes, stays on the wall clock
    assert done.queued_wall_at < pool_clock - timedelta(hours=1)


def test_a_failed_what_if_finishes_on_the_pools_clock(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    pool_clock = cluster_ahead()
    request = quota_request(world)
    monkeypatch.setattr(whatif, "dispatch_what_if", lambda run_id: None)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("proposed: 2 jobs never finish (a-0, a-1)")

    monkeypatch.setattr(whatif, "replay_request", refused)
    run = do_start_what_if(request, acting_user=world["admin"], days=1)
    done = whatif.run_what_if(run.pk)
    assert done is not None and done.state == "failed"
    assert done.started_at is not None and done.finished_at is not None
    assert pool_clock <= done.started_at <= done.finished_at
    assert WhatIfRun.objects.get(pk=run.pk).finished_at == done.finished_at


# ----------------------------------------------------------------------------- applying requests


def test_an_applied_quota_request_enters_the_quota_history_on_the_pools_clock(
    world: dict[str, Any],
) -> None:
    # given a cluster a day ahead and a submitted request for 8 / 12 / 24
    pool_clock = cluster_ahead()
    request = quota_request(world)
    # when an admin approves and applies it
    applied = do_approve_and_apply_quota_request(request, acting_user=world["admin"])
    # then the new levels enter the history at the pool's clock, the request's applied_at
    change = QueueQuotaChange.objects.filter(queue=world["queue"]).latest("effective_from")
    assert [change.guarantee, change.deserved, change.capability] == [8, 12, 24]
    assert change.effective_from == applied.applied_at
    assert change.effective_from >= pool_clock


def test_reports_place_an_applied_quota_change_when_the_pool_made_it(world: dict[str, Any]) -> None:
    # given a cluster a day ahead: its last hour is still under the old guarantee of 4
    pool_clock = cluster_ahead()
    hour_before = microseconds(pool_clock - timedelta(hours=1))
    # when a request raising the guarantee to 8 is applied
    do_approve_and_apply_quota_request(quota_request(world), acting_user=world["admin"])
    # then the reports' quota history (the accounting roll-up's) reads 4 for the hour the
    # pool ran before the change and 8 from the change on (with the wall clock's stamp it
    # read 8 for the whole day before)
    guarantee = Histories.load().guarantees[world["h100"].pk][world["queue"].pk]
    assert guarantee.at(hour_before) == 4
    assert guarantee.at(microseconds(pool_clock + timedelta(seconds=1))) == 8


def test_an_applied_budget_request_writes_its_grant_to_the_ledger_on_the_pools_clock(
    world: dict[str, Any],
) -> None:
    pool_clock = cluster_ahead()
    applied = do_approve_and_apply_quota_request(
        budget_request(world, pool_clock), acting_user=world["admin"]
    )
    grant = BudgetLedgerEntry.objects.get(budget__tenant=world["team"], kind=LedgerEntryKind.GRANT)
    assert grant.gpu_hours == 200
    assert grant.at == applied.applied_at and grant.at >= pool_clock


# ----------------------------------------------------------------------------- admins' edits


def test_an_admins_quota_edit_through_the_api_enters_the_history_on_the_pools_clock(
    world: dict[str, Any],
) -> None:
    pool_clock = cluster_ahead()
    answer = admin_api(world).put(
        "/api/v1/queues/nlp/quotas/h100/",
        {"guarantee": 6, "deserved": 10, "capability": 20, "reason": "rebalance"},
        format="json",
    )
    assert answer.status_code == 200, answer.json()
    change = QueueQuotaChange.objects.filter(queue=world["queue"]).latest("effective_from")
    assert change.guarantee == 6 and change.effective_from >= pool_clock
    # and removing the quota records its zero levels after that, on the same clock
    do_delete_queue_quota(QueueQuota.objects.get(queue=world["queue"]), acting_user=None)
    removed = QueueQuotaChange.objects.filter(queue=world["queue"]).latest("effective_from")
    assert removed.guarantee == 0 and removed.effective_from >= change.effective_from


def test_an_admins_budget_grant_through_the_api_is_on_the_pools_clock(
    world: dict[str, Any],
) -> None:
    pool_clock = cluster_ahead()
    answer = admin_api(world).post(
        "/api/v1/budgets/",
        {
            "tenant": "nlp",
            "priority_class": "high",
            **period_fields(timezone.localdate(pool_clock)),
            "gpu_hours": "50",
            "reason": "December",
        },
        format="json",
    )
    assert answer.status_code == 201, answer.json()
    budget = PriorityBudget.objects.get(tenant=world["team"])
    assert budget.entries.get(kind=LedgerEntryKind.GRANT).at >= pool_clock


def test_an_admins_quota_edit_in_the_admin_site_is_on_the_pools_clock(
    world: dict[str, Any], submit_admin_form: Any
) -> None:
    pool_clock = cluster_ahead()
    url = f"/admin/quotas/queue/{world['queue'].pk}/change/"
    response = submit_admin_form(
        url, {"quotas-0-guarantee": "5", "quotas-0-deserved": "9", "quotas-0-capability": "18"}
    )
    assert response.status_code == 302, getattr(response, "context", None)
    change = QueueQuotaChange.objects.filter(queue=world["queue"]).latest("effective_from")
    assert change.guarantee == 5 and change.effective_from >= pool_clock


def test_a_flavor_price_change_enters_the_price_history_on_the_pools_clock(
    world: dict[str, Any],
) -> None:
    """The roll-up prices usage by the price history beside usage the loop stamps on the
    pool's clock: a price changed on the wall clock repriced a day of hours already run."""
    from gpupool.inventory.actions import do_save_flavor
    from gpupool.inventory.models import FlavorPriceChange

    ahead = cluster_ahead()
    h100 = world["h100"]
    h100.hourly_price = Decimal("3.25")
    do_save_flavor(h100, acting_user=world["admin"])
    latest = FlavorPriceChange.objects.filter(flavor=h100).order_by("-effective_from").first()
    assert latest is not None and latest.hourly_price == Decimal("3.25")
    assert latest.effective_from >= ahead - timedelta(seconds=5)
