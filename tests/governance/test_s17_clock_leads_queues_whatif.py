"""Records on one clock, a tenant never left without a lead, a queue tree with one root, and
what-if results that say how much history they replayed and keep flavors apart.

A simulated cluster runs ahead of the wall clock (the demo: an hour a minute); the pool's
records and people's audited actions are stamped on its clock (``control.clock.pool_now``).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.template.loader import render_to_string
from django.utils import timezone
from domain_builders import flavor, quota

from gpupool.audit.actions import record_system_audit_rows
from gpupool.audit.models import AuditEvent
from gpupool.control.choices import CycleStatus
from gpupool.control.models import SchedulingCycle
from gpupool.quotas import whatif
from gpupool.quotas.actions import (
    BudgetMove,
    do_delete_queue,
    do_grant_budget,
    do_record_budget_moves,
)
from gpupool.quotas.models import BudgetLedgerEntry, Queue, WhatIfRun
from gpupool.tenancy.actions import do_delete_tenant, do_remove_membership, do_set_membership
from gpupool.tenancy.models import Membership, Tenant
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

AHEAD = timedelta(hours=7)
HOUR = 3600


def cluster_ahead() -> datetime:
    """A finished cycle whose cluster read the wall clock plus seven hours: the pool's clock."""
    wall = timezone.now()
    cycle = SchedulingCycle.objects.create(
        started_at=wall, finished_at=wall, status=CycleStatus.SUCCEEDED, cluster_at=wall + AHEAD
    )
    assert cycle.cluster_at is not None
    return cycle.cluster_at


# ----------------------------------------------------------------------------- 1. one clock


@pytest.mark.django_db
def test_a_cycles_budget_audit_rows_are_stamped_when_its_ledger_entries_are(pool: Any) -> None:
    budget = do_grant_budget(
        pool.nlp,
        pool.high,
        gpu_hours=100,
        acting_user=None,
        period_start=date(2026, 11, 1),
        period_end=date(2027, 1, 1),
    )
    at = timezone.now() + AHEAD  # the loop's cluster clock, hours ahead of the wall's
    do_record_budget_moves([BudgetMove(budget.pk, "spend", Decimal("-2"), None)], at=at)
    entry = BudgetLedgerEntry.objects.get(budget=budget, kind="spend")
    row = AuditEvent.objects.get(action="quotas.cycle_budget", object_id=str(budget.pk))
    assert entry.at == at
    assert row.at == at  # was the wall clock's, seven hours before the entry it describes


@pytest.mark.django_db
def test_system_audit_rows_without_a_time_take_the_pools_clock() -> None:
    ahead = cluster_ahead()
    record_system_audit_rows("tests.note", [("quotas.queue", "1", "q", None, {}, "why")])
    assert AuditEvent.objects.get(action="tests.note").at >= ahead


@pytest.mark.django_db
def test_a_what_if_run_is_created_and_started_on_one_clock(
    pool: Any, api_as: Any, file_request: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(whatif, "dispatch_what_if", lambda run_id: None)
    ahead = cluster_ahead()
    request = file_request(submit=True)
    started = api_as("ada").post(f"/api/v1/quota-requests/{request['id']}/what-if/", {"days": 2})
    assert started.status_code == 202, started.json()
    whatif.run_what_if(started.json()["id"])
    run = WhatIfRun.objects.get(pk=started.json()["id"])
    assert run.started_at is not None
    assert ahead <= run.created_at <= run.started_at  # created at the wall's, 7 h before


@pytest.mark.django_db
def test_a_membership_is_created_on_the_pools_clock(pool: Any) -> None:
    ahead = cluster_ahead()
    membership = do_set_membership(
        pool.users["fin"], pool.vision, role="member", acting_user=pool.users["ada"]
    )
    audited = AuditEvent.objects.filter(action="tenancy.set_membership").latest("id")
    assert ahead <= membership.created_at <= audited.at


# ----------------------------------------------------------------------------- 2. the last lead


@pytest.mark.django_db
def test_the_only_lead_cannot_demote_themselves_through_the_api(pool: Any, api_as: Any) -> None:
    mine = Membership.objects.get(user=pool.users["lena"], tenant=pool.nlp)
    answer = api_as("lena").patch(f"/api/v1/memberships/{mine.pk}/", {"role": "member"})
    assert answer.status_code == 400, answer.json()
    assert "only lead of nlp" in str(answer.json()["error"]["fields"]["role"])
    assert Membership.objects.get(pk=mine.pk).role == "lead"  # and the team can still act
    again = api_as("lena").patch(f"/api/v1/memberships/{mine.pk}/", {"role": "lead"})
    assert again.status_code == 200


@pytest.mark.django_db
def test_the_last_lead_is_not_removed_even_by_an_admin(pool: Any, api_as: Any) -> None:
    mine = Membership.objects.get(user=pool.users["lena"], tenant=pool.nlp)
    answer = api_as("ada").delete(f"/api/v1/memberships/{mine.pk}/")
    assert answer.status_code == 400
    assert "role" in answer.json()["error"]["fields"]
    assert Membership.objects.filter(pk=mine.pk).exists()
    with pytest.raises(ValidationError, match="Make another member a lead first"):
        do_set_membership(pool.users["lena"], pool.nlp, role="member", acting_user=None)


@pytest.mark.django_db
def test_the_lead_hands_over_then_steps_down(pool: Any, api_as: Any) -> None:
    lena = api_as("lena")
    other = Membership.objects.get(user=pool.users["max"], tenant=pool.nlp)
    assert lena.patch(f"/api/v1/memberships/{other.pk}/", {"role": "lead"}).status_code == 200
    mine = Membership.objects.get(user=pool.users["lena"], tenant=pool.nlp)
    assert lena.patch(f"/api/v1/memberships/{mine.pk}/", {"role": "member"}).status_code == 200
    assert lena.delete(f"/api/v1/memberships/{mine.pk}/").status_code == 403  # not a lead now
    assert api_as("max").delete(f"/api/v1/memberships/{mine.pk}/").status_code == 204


@pytest.mark.django_db
def test_a_tenants_only_member_may_leave_and_a_deleted_tenant_takes_its_leads(
    pool: Any,
) -> None:
    team = Tenant.objects.create(name="solo")
    alone = do_set_membership(pool.users["fin"], team, role="lead", acting_user=None)
    do_remove_membership(alone, acting_user=None)  # nobody left to lock out
    do_set_membership(pool.users["fin"], team, role="lead", acting_user=None)
    do_set_membership(pool.users["max"], team, role="member", acting_user=None)
    do_delete_tenant(team, acting_user=None)
    assert not Tenant.objects.filter(name="solo").exists()


@pytest.mark.django_db
def test_the_admin_site_refuses_demoting_the_last_lead(pool: Any, admin_client: Any) -> None:
    mine = Membership.objects.get(user=pool.users["lena"], tenant=pool.nlp)
    page = admin_client.post(
        f"/admin/tenancy/membership/{mine.pk}/change/", {"role": "member"}, follow=True
    )
    assert "only lead of nlp" in page.content.decode()
    assert Membership.objects.get(pk=mine.pk).role == "lead"


# ----------------------------------------------------------------------------- 3. queue tree


@pytest.mark.django_db
def test_a_second_root_queue_is_refused_naming_parent(pool: Any, api_as: Any) -> None:
    answer = api_as("ada").post("/api/v1/queues/", {"name": "w17q"}, format="json")
    assert answer.status_code == 400
    why = str(answer.json()["error"]["fields"]["parent"])
    assert f"one root, {pool.root.name}" in why
    assert not Queue.objects.filter(name="w17q").exists()
    # the root itself still saves (it is the one root)
    kept = api_as("ada").patch(f"/api/v1/queues/{pool.root.name}/", {"weight": "2"})
    assert kept.status_code == 200, kept.json()


@pytest.mark.django_db
def test_deleting_the_root_says_it_is_the_root_with_children(pool: Any, api_as: Any) -> None:
    answer = api_as("ada").delete(f"/api/v1/queues/{pool.root.name}/")
    assert answer.status_code == 400
    fields = answer.json()["error"]["fields"]
    assert "parent" not in fields
    assert f"queue {pool.root.name} is the root of the queue tree" in str(fields["queue"])
    assert "nlp, vision" in str(fields["queue"])
    org = Queue.objects.create(name="org", parent=pool.root)
    Queue.objects.create(name="team", parent=org)
    with pytest.raises(ValidationError, match="queue org is a parent queue with 1 child queue"):
        do_delete_queue(org, acting_user=None)


@pytest.mark.django_db
def test_queues_filter_by_parent_null_lists_the_root(pool: Any, api_as: Any) -> None:
    listed = api_as("ada").get("/api/v1/queues/?parent=null").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["name"] for row in rows] == [pool.root.name]
    children = api_as("ada").get(f"/api/v1/queues/?parent={pool.root.name}").json()
    rows = children["results"] if isinstance(children, dict) else children
    assert sorted(row["name"] for row in rows) == ["nlp", "vision"]


# ----------------------------------------------------------------------------- 4. what-if


@pytest.mark.django_db
def test_a_what_if_over_a_young_pool_replays_its_history_and_says_so(
    pool: Any, api_as: Any, file_request: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(whatif, "dispatch_what_if", lambda run_id: None)
    five_hours_ago = timezone.now() - timedelta(hours=5)
    for index in range(2):
        do_submit_workload(
            f"nlp-{index}",
            queue=pool.nlp_queue,
            pod_sets=[PodSetSpec(count=1, gpus=8, flavor=pool.h100)],
            expected_runtime_s=HOUR,
            at=five_hours_ago,
        )
    request = file_request(submit=True)
    started = api_as("ada").post(f"/api/v1/quota-requests/{request['id']}/what-if/", {"days": 30})
    run = whatif.run_what_if(started.json()["id"])
    assert run is not None and run.state == "succeeded", run and run.error
    result = run.result
    assert result["days"] == 30 and result["window_shortened"] is True
    assert 5 * HOUR <= result["history_s"] < 5 * HOUR + 60
    assert result["window_s"] < 5 * HOUR + 60  # not 30 days: utilisation over the history
    assert result["first_submission"] == five_hours_ago.isoformat()
    assert result["before"]["utilisation"] > 0.05  # 16 GPU-hours of 32 GPUs over 5 hours
    page = render_to_string(
        "dashboard/partials/what_if.html", {"run": run, "request_obj": run.request}
    )
    assert "The pool has 5 h of history, less than the 30 days asked" in page


@pytest.mark.django_db
def test_deserved_gpus_are_given_per_flavor_and_old_results_still_render(
    pool: Any, api_as: Any, file_request: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(whatif, "dispatch_what_if", lambda run_id: None)
    l40s = flavor("l40s")
    quota(pool.nlp_queue, l40s, 0, 2, 4)
    do_submit_workload(
        "nlp-0",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=8, flavor=pool.h100)],
        expected_runtime_s=HOUR,
        at=timezone.now() - timedelta(hours=2),
    )
    request = file_request(submit=True)  # nlp's h100: deserved 8 -> 12
    started = api_as("ada").post(f"/api/v1/quota-requests/{request['id']}/what-if/", {"days": 2})
    run = whatif.run_what_if(started.json()["id"])
    assert run is not None and run.state == "succeeded", run and run.error
    nlp = run.result["tenants"]["nlp"]
    assert nlp["before"]["deserved_gpus"] == 10  # the sum, as before
    assert nlp["before"]["deserved_gpus_by_flavor"] == {"h100": 8, "l40s": 2}
    assert nlp["after"]["deserved_gpus_by_flavor"] == {"h100": 12, "l40s": 2}
    page = render_to_string(
        "dashboard/partials/what_if.html", {"run": run, "request_obj": run.request}
    )
    assert "h100: 8 GPUs, l40s: 2 GPUs" in page and "h100: 12 GPUs, l40s: 2 GPUs" in page
    # a result stored before the figures per flavor: its sum, named as all flavors together
    for side in ("before", "after"):
        del run.result["tenants"]["nlp"][side]["deserved_gpus_by_flavor"]
    old = render_to_string(
        "dashboard/partials/what_if.html", {"run": run, "request_obj": run.request}
    )
    assert "(all flavors together)" in old
