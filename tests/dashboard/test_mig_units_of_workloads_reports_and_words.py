"""A MIG flavor's figures in MIG instances (``inventory.units``, the one rule) where the walk of
2026-12-07 found GPUs still said or added: the workloads API's ``unit``, the reports' rows
(a row summed over flavors, the Cost page's teams CSV, is one unit's), the Cost page's
trend of the last months (GPU-hours of the whole-GPU flavors only), the fairness sentence's
"1 MIG instance ... is free", and the what-if's caption of deserved shares.

The pool (``conftest``): h100 nodes n1 (8 GPUs, one broken) and n2 (8), and here MIG node m1
of flavor ``a100-3g.40gb`` (8 A100 cards of two 3g.40gb instances each); nlp and vision
each hold a quota of 4 / 8 / 16 of it, as of h100."""

from __future__ import annotations

import csv
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from dashboard_pages import text
from django.utils import timezone
from domain_builders import MIG_FLAVOR, mig_beside
from test_cost_page import day_after_tomorrow
from two_teams import quota_request

from gpupool.accounting.actions import do_close_usage, do_open_usage, do_roll_up_usage
from gpupool.dashboard.fairness import Standing, explain_fairness
from gpupool.inventory.models import Node
from gpupool.inventory.units import GPU_UNIT, MIG_UNIT
from gpupool.quotas.models import WhatIfRun
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)

pytestmark = pytest.mark.django_db

MIG = MIG_FLAVOR


@pytest.fixture
def mig_pool(pool: Any) -> Any:
    """The pool with MIG node m1 beside the h100 nodes, and a quota of it for each team."""
    mig_beside(pool)
    return pool


def test_the_workloads_api_says_a_mig_workloads_unit(mig_pool: Any, page_as: Any) -> None:
    """A list's row and the story carry ``unit``: "MIG instance" for work of MIG flavors
    only, "GPU" otherwise -- also for a MIG pod set that may run on h100 as well."""
    for name, first, further in (
        ("slices", mig_pool.mig, []),
        ("whole", mig_pool.h100, []),
        ("either", mig_pool.mig, [mig_pool.h100]),
    ):
        spec = PodSetSpec(count=1, gpus=2, flavor=first, flavor_choices=further)
        do_submit_workload(name, queue=mig_pool.nlp_queue, pod_sets=[spec])
    client = page_as("ada")
    rows = client.get("/api/v1/workloads/", {"page_size": 50}).json()["results"]
    said = {row["name"]: (row["gpus"], row["unit"]) for row in rows}
    assert said == {
        "slices": ("2.000", MIG_UNIT),
        "whole": ("2.000", GPU_UNIT),
        "either": ("2.000", GPU_UNIT),
    }
    for name, unit in (("slices", MIG_UNIT), ("whole", GPU_UNIT), ("either", GPU_UNIT)):
        story = client.get(f"/api/v1/workloads/nlp/{name}/").json()
        assert story["unit"] == unit, name


@pytest.fixture
def used_both(mig_pool: Any) -> Any:
    """nlp used 6 h100 GPUs and 2 MIG instances for two hours from ``t0``, rolled up."""
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
    return t0


def test_the_teams_csv_keeps_mig_instance_hours_apart_from_gpu_hours(
    used_both: Any, page_as: Any
) -> None:
    """The Cost page's teams CSV (``by=tenant``): a row per team and unit, never 12 GPU-hours
    and 4 MIG instance-hours added into 16; the costs of the two rows add up."""
    client = page_as("fin")
    link = client.get(f"/cost/?month={used_both:%Y-%m}").context["csv"]["teams"]
    lines = b"".join(client.get(link).streaming_content).decode().splitlines()
    rows = list(csv.DictReader(lines))
    nlp = {row["unit"]: row for row in rows if row["tenant"] == "nlp"}
    assert set(nlp) == {GPU_UNIT, MIG_UNIT}
    # By hand: 6 GPUs x 2 h; 2 MIG instances x 2 h.
    assert (Decimal(nlp[GPU_UNIT]["used"]), Decimal(nlp[MIG_UNIT]["used"])) == (12, 4)
    # Money adds up across the units' rows: to what the page says the teams are charged.
    charged = client.get(f"/cost/?month={used_both:%Y-%m}").context["charged_cost_all"]
    assert sum(Decimal(row["charged_cost"]) for row in rows) == charged
    whole = client.get(link.replace("format=csv", "format=json")).json()["results"]
    assert {(row["tenant"], row["unit"]) for row in whole} >= {
        ("nlp", GPU_UNIT),
        ("nlp", MIG_UNIT),
    }
    assert all(row["unit"] in (GPU_UNIT, MIG_UNIT) for row in whole)


def test_the_reports_rows_of_a_flavor_carry_its_unit(used_both: Any, page_as: Any) -> None:
    client = page_as("fin")
    span = {"start": f"{used_both:%Y-%m}-01", "end": f"{used_both:%Y-%m-%d}"}
    for report, by in (
        ("usage", {"by": "tenant,flavor"}),
        ("attribution", {"by": "tenant,flavor"}),
        ("capacity", {}),
    ):
        rows = client.get(f"/api/v1/reports/{report}/", span | by).json()["results"]
        units = {row["flavor"]: row["unit"] for row in rows}
        assert units == {"h100": GPU_UNIT, MIG: MIG_UNIT}, report
    rows = client.get("/api/v1/reports/workloads/", span).json()["results"]
    assert {row["name"]: row["unit"] for row in rows} == {
        "nlp-h100": GPU_UNIT,
        "nlp-mig": MIG_UNIT,
    }


def test_the_cost_trend_draws_gpu_hours_only(used_both: Any, page_as: Any) -> None:
    """The trend's bars and capacity line are GPU-hours of the whole-GPU flavors: by hand, of
    h100 nlp is charged 12 GPU-hours (used), vision 8 (its guarantee of 4 held idle two hours),
    and 15 healthy GPUs give 30 GPU-hours; the MIG flavor's hours (nlp 8, vision 8, 32 of
    capacity) are left out, and the page says so."""
    response = page_as("fin").get(f"/cost/?month={used_both:%Y-%m}")
    figure = response.context["trend_figure"]
    month = f"{used_both:%Y-%m}"
    at = figure["data"][0]["x"].index(month)
    bars = {trace["name"]: trace["y"][at] for trace in figure["data"] if trace["type"] == "bar"}
    assert bars == {"nlp": 12.0, "vision": 8.0}
    [line] = [trace for trace in figure["data"] if trace["type"] == "scatter"]
    assert line["y"][at] == 30.0
    assert f"the MIG flavors' MIG instance-hours ({MIG}) are not added to them" in text(response)


def test_one_free_mig_instance_is_free_not_are_free() -> None:
    def starved() -> Standing:
        return Standing("nlp", "nlp", Decimal(8), Decimal(2), Decimal(0), Decimal(0), 3)

    [one] = explain_fairness([starved()], free=Decimal(1), unit=MIG_UNIT)
    assert "though 1 MIG instance of this flavor is free: its work" in one.text, one.text
    [two] = explain_fairness([starved()], free=Decimal(2), unit=MIG_UNIT)
    assert "though 2 MIG instances of this flavor are free: its work" in two.text, two.text
    [gpu] = explain_fairness([starved()], free=Decimal(1), unit=GPU_UNIT)
    assert "though 1 GPU of this flavor is free" in gpu.text, gpu.text


def what_if_caption(request: Any, page_as: Any, shares: dict[str, dict[str, int]]) -> str:
    """The caption of the deserved shares' table of ``request``'s what-if, run last, whose
    result has ``shares``."""
    now = timezone.now()
    WhatIfRun.objects.create(
        request=request,
        state="succeeded",
        days=2,
        progress=1.0,
        started_by=request.requested_by,
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
    return part.split("<caption>Deserved", 1)[1].split("</caption>", 1)[0]


def test_the_what_ifs_caption_says_mig_instances_for_a_mig_flavor(
    mig_pool: Any, page_as: Any
) -> None:
    request = quota_request(
        mig_pool, flavor=mig_pool.mig, justification="more slices", submit=True, guarantee=4
    )
    only_mig = what_if_caption(request, page_as, {"before": {MIG: 8}, "after": {MIG: 10}})
    assert only_mig.startswith(" MIG instances per team, by flavor"), only_mig
    assert "GPU" not in only_mig
    both = {"before": {"h100": 8, MIG: 8}, "after": {"h100": 8, MIG: 10}}
    mixed = what_if_caption(request, page_as, both)
    assert mixed.startswith(" GPUs and MIG instances per team, by flavor"), mixed


def test_the_workload_pages_say_a_mig_workloads_mig_instances(mig_pool: Any, page_as: Any) -> None:
    """My workloads' GPUs cell and the workload page's Asks card (and its pod sets) count a
    MIG workload's MIG instances, as its API row's ``unit`` says; other work, GPUs."""
    for name, first, further in (
        ("slices", mig_pool.mig, []),
        ("either", mig_pool.mig, [mig_pool.h100]),
    ):
        spec = PodSetSpec(count=1, gpus=2, flavor=first, flavor_choices=further)
        made = do_submit_workload(name, queue=mig_pool.nlp_queue, pod_sets=[spec])
    m1 = Node.objects.get(name="m1")
    do_transition_workload(  # "either" runs on the MIG node: its pod's 2 MIG instances
        made, "admitted", reason="test", placements=[PlacementSpec("main", 0, m1, [0, 1])]
    )
    client = page_as("ada")
    table = text(client.get("/workloads/"))
    cells = {
        name: row.split("</tr>")[0]
        for name in ("slices", "either")
        for row in table.split("<tr>")
        if f"<code>nlp/{name}</code>" in row
    }
    assert '<th scope="col" class="number">Asks</th>' in table  # as the CLI's ASKS, the card's
    assert ">2 MIG instances<" in cells["slices"] and "GPU" not in cells["slices"]
    assert ">2 GPUs<" in cells["either"]
    page = text(client.get("/workloads/nlp/slices/"))
    asks = page.split('<p class="label">Asks</p>', 1)[1].split("</div>", 1)[0]
    assert '<p class="value">2 MIG instances</p>' in asks
    assert f"1 pod \u00d7 2 MIG instances of {MIG}" in asks  # a multiplication sign
    either = text(client.get("/workloads/nlp/either/"))
    assert '<p class="value">2 GPUs</p>' in either.split('<p class="label">Asks</p>', 1)[1]
    # Where its pod is: on the MIG node, in MIG instances (the node's flavor's unit).
    assert '<td class="number" data-column="gpus">2 MIG instances</td>' in either
