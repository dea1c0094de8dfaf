"""A MIG flavor's figures in its MIG instances (``inventory.units``, the one rule) on the
places that still said GPUs: the Queues page's "Who holds what" sentences, the what-if's
deserved shares by team, a MIG victim's progress lost (MIG instance-hours: the Preemptions
page, its churn, the workload page and ``gpupool why``) and the Cost page, whose hours of a
MIG flavor are never added to GPU-hours. Each beside an h100 flavor, whose figures stay GPUs.

The pool (``conftest``): h100 nodes n1 (8 GPUs, one broken) and n2 (8), and here MIG node m1
of flavor ``a100-3g.40gb`` (8 A100 cards of two 3g.40gb instances each); nlp and vision
each hold a quota of 4 / 8 / 16 of it, as of h100."""

from __future__ import annotations

import io
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from dashboard_pages import live, text
from django.utils import timezone
from domain_builders import MIG_FLAVOR, mig_beside
from test_cost_page import cells, day_after_tomorrow
from two_teams import quota_request, submit

from gpupool.accounting.actions import (
    do_close_usage,
    do_open_usage,
    do_record_preemption,
    do_roll_up_usage,
)
from gpupool.client.main import print_story
from gpupool.dashboard.fairness import Lender, Standing, explain_fairness
from gpupool.inventory.units import GPU_UNIT, MIG_UNIT
from gpupool.quotas.models import WhatIfRun
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db

MIG = MIG_FLAVOR


@pytest.fixture
def mig_pool(pool: Any) -> Any:
    """The pool with MIG node m1 beside the h100 nodes, and a quota of it for each team."""
    mig_beside(pool)
    return pool


def words(html: str) -> str:
    """The text of a piece of a page, tags dropped and spaces squeezed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_who_holds_what_says_a_mig_flavors_shares_in_mig_instances(
    mig_pool: Any, page_as: Any
) -> None:
    said = words(text(live(page_as("max"), f"/queues/?flavor={MIG}")))
    assert "nlp holds 0 MIG instances, within the 8 MIG instances it deserves." in said
    part = said.split("Who holds what", 1)[1]
    assert "GPU" not in part.split(" Queue ", 1)[0], part[:600]
    h100 = words(text(live(page_as("max"), "/queues/?flavor=h100")))
    assert "nlp holds 0 GPUs, within the 8 GPUs it deserves." in h100


def test_a_mig_borrowers_sentence_names_its_sources_in_mig_instances() -> None:
    def borrower() -> Standing:
        return Standing(
            "nlp", "nlp", Decimal(4), Decimal(6), Decimal(2), Decimal(0), 0,
            (Lender("", Decimal(1), unassigned=True), Lender("vision", Decimal(1))),
        )  # fmt: skip

    lender = Standing("vision", "vision", Decimal(4), Decimal(0), Decimal(0), Decimal(1), 0)
    [mig, _] = explain_fairness([borrower(), lender], unit=MIG_UNIT)
    assert mig.text == (
        "nlp holds 6 MIG instances: 4 MIG instances deserved, 2 MIG instances borrowed, "
        "nearest first, from the pool's unclaimed MIG instances (1 MIG instance), vision "
        "(1 MIG instance). Borrowed MIG instances are taken back when their owner wants them."
    )
    [h100, _] = explain_fairness([borrower(), lender], unit=GPU_UNIT)
    assert h100.text.startswith("nlp holds 6 GPUs: 4 GPUs deserved, 2 GPUs borrowed")
    assert "Borrowed GPUs are taken back" in h100.text


def test_the_what_ifs_deserved_shares_say_a_mig_flavors_in_mig_instances(
    mig_pool: Any, page_as: Any
) -> None:
    request = quota_request(
        mig_pool, flavor=mig_pool.mig, justification="more slices", submit=True, guarantee=4
    )
    now = timezone.now()
    shares = {"before": {"h100": 8, MIG: 8}, "after": {"h100": 8, MIG: 1}}
    WhatIfRun.objects.create(
        request=request,
        state="succeeded",
        days=2,
        progress=1.0,
        started_by=mig_pool.users["ada"],
        started_at=now,
        finished_at=now,
        result={
            "jobs": 0,
            "tenants": {
                "nlp": {side: {"deserved_gpus_by_flavor": by} for side, by in shares.items()}
            },
        },
    )
    part = text(page_as("ada").get(f"/approvals/{request.pk}/what-if/"))
    table = words(part.split("<table data-deserved>", 1)[1].split("</table>", 1)[0])
    assert f"nlp h100: 8 GPUs, {MIG}: 8 MIG instances h100: 8 GPUs, {MIG}: 1 MIG instance" in (
        table
    ), table


def stopped(pool: Any, name: str, nodes: list[str], freed: int, lost: str) -> Any:
    """vision's workload ``name`` stopped by a node failure on ``nodes``."""
    victim = submit(pool, name, pool.vision_queue, "vic")
    do_record_preemption(
        victim,
        reason="node-failure",
        at=timezone.now() - timedelta(minutes=5),
        gpus_freed=freed,
        lost_gpu_hours=Decimal(lost),
        nodes=nodes,
    )
    return victim


@pytest.fixture
def victims(mig_pool: Any) -> None:
    """vision's "on-mig" stopped on m1 (2 MIG instances freed, 3 of their hours lost) and
    "on-h100" on n1 (8 GPUs freed, 2 GPU-hours lost)."""
    stopped(mig_pool, "on-mig", ["m1"], 2, "3")
    stopped(mig_pool, "on-h100", ["n1"], 8, "2")


def test_the_preemptions_page_says_a_mig_victims_loss_in_mig_instance_hours(
    victims: None, page_as: Any
) -> None:
    page = text(page_as("ada").get("/preemptions/"))
    said = words(page)
    assert "2 GPU-h and 3 MIG instance-hours of progress lost" in said
    listed = page.split('id="history-title"', 1)[1].split("</table>", 1)[0]
    rows = {
        found.group(1): words(row)
        for row in listed.split("<tr>")[2:]
        if (found := re.search(r"<code>vision/([^<]+)</code>", row))
    }
    assert rows["on-mig"].endswith("2 MIG instances 3 MIG instance-hours"), rows["on-mig"]
    assert rows["on-h100"].endswith("8 GPUs 2 GPU-h"), rows["on-h100"]
    churn = words(page.split('id="churn-title"', 1)[1].split("</table>", 1)[0])
    assert "vision 2 2 GPU-h and 3 MIG instance-hours 0" in churn, churn


def test_the_workload_page_says_a_mig_victims_loss_in_mig_instance_hours(
    victims: None, page_as: Any
) -> None:
    story = words(text(page_as("vic").get("/workloads/vision/on-mig/")))
    assert "Progress lost to preemptions 3 MIG instance-hours" in story
    assert "2 MIG instances 3 MIG instance-hours" in story
    assert "GPU-h" not in story
    h100 = words(text(page_as("vic").get("/workloads/vision/on-h100/")))
    assert "Progress lost to preemptions 2 GPU-h" in h100 and "8 GPUs 2 GPU-h" in h100


def test_gpupool_why_says_a_mig_victims_loss_in_mig_instance_hours(
    victims: None, page_as: Any
) -> None:
    for name, expected in (
        ("on-mig", ("3 MIG instance-hours of progress lost", "2 MIG instances freed, "
                    "3 MIG instance-hours lost")),
        ("on-h100", ("2 GPU-hours of progress lost", "8 GPUs freed, 2 GPU-hours lost")),
    ):  # fmt: skip
        out = io.StringIO()
        print_story(page_as("vic").get(f"/api/v1/workloads/vision/{name}/").json(), out)
        assert all(words_ in out.getvalue() for words_ in expected), out.getvalue()


def test_the_cost_page_keeps_a_mig_flavors_hours_apart_from_gpu_hours(
    mig_pool: Any, page_as: Any
) -> None:
    t0 = day_after_tomorrow()
    do_roll_up_usage(until=t0)
    for name, of, gpus in (("nlp-h100", mig_pool.h100, 6), ("nlp-mig", mig_pool.mig, 2)):
        workload = do_submit_workload(
            name,
            queue=mig_pool.nlp_queue,
            pod_sets=[PodSetSpec(count=1, gpus=gpus, flavor=of)],
            at=t0,
        )
        do_open_usage(workload, flavor=of, gpus=gpus, at=t0)
        do_close_usage(workload, at=t0 + timedelta(hours=2))
    do_roll_up_usage(until=t0 + timedelta(hours=2))
    page = text(page_as("fin").get(f"/cost/?month={t0:%Y-%m}"))
    # By hand: h100 as test_cost_page's (nlp used 12 GPU-hours, vision 8 reserved idle);
    # of the MIG flavor (guarantees of 4 each, 16 healthy instances) nlp used 2 instances
    # for two hours: 4 within its guarantee, 4 reserved idle; vision 8 reserved idle.
    assert cells(page, "<tr><td>nlp</td>")[0] == "12 GPU-h"
    assert cells(page, '<tr id="team-totals">')[:3] == ["12 GPU-h", "8 GPU-h", "8 GPU-h"]
    mig = page.split('id="cost-teams-mig"', 1)[1].split("</table>", 1)[0]
    # The hours in MIG instance-hours, as the table's caption and its Charged column say
    # (not in each cell: eight cells of "MIG instance-hours" overflowed a laptop's window).
    assert "<caption>MIG flavors, in MIG instance-hours</caption>" in mig
    assert 'Charged <span class="nowrap">MIG instance-hours</span>' in mig
    assert cells(mig, "<tr><td>nlp</td>") == [
        MIG, "4", "4", "4", "0", "4", "8", "10.00", "10.00", "20.00",
    ]  # fmt: skip
    # Money adds up across flavors: 30.00 + 20.00 (h100) + 20.00 + 20.00 (MIG).
    assert re.search(r'id="charged-cost-all">90\.00<', page)
    line = words(page.split('id="reconciliation">', 1)[1].split("</p>", 1)[0])
    assert line.startswith("For the whole-GPU flavors, the lines add up to 30 GPU-h"), line
    assert "with them the capacity is worth 155.00" in line  # 75.00 + 32 x 2.50
    # The pool's lines: each flavor's hours in its unit, named once in its row.
    assert cells(page, f"<tr><td>{MIG}</td>")[:3] == ["MIG instance-hours", "32", "4"]
    assert cells(page, "<tr><td>h100</td>")[:2] == ["GPU-hours", "30"]
