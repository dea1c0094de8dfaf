"""The Cluster, Fragmentation and Cost pages after a walk-through in Chromium: a broken GPU
that work still holds counts once, as its holder's (as the core's quota tree, which the
Queues page reads, counts it); draining a node asks first and records why; money reads as
money."""

from __future__ import annotations

import csv
import html
import io
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from dashboard_pages import text
from django.utils import timezone
from domain_builders import queue, quota

from gpupool.accounting.actions import do_close_usage, do_open_usage, do_roll_up_usage
from gpupool.accounting.reports import NO_TEAM
from gpupool.audit.models import AuditEvent
from gpupool.dashboard.heatmap import (
    BROKEN,
    FREE,
    describe,
    domain_summaries,
    free_spread,
    gpu_rows,
    legend_counts,
)
from gpupool.dashboard.templatetags.dashboard import money_filter, price
from gpupool.inventory.models import Node
from gpupool.inventory.queries import flavor_fragmentation
from gpupool.number_formats import PRICE_PLACES, money
from gpupool.scheduler.cycle_state import Cycle
from gpupool.scheduler.types import (
    MILLI,
    FlavorInfo,
    NodeInfo,
    PodPlacement,
    PodSetInfo,
    PolicyInfo,
    PriorityClassInfo,
    QueueInfo,
    Snapshot,
    WorkloadInfo,
)
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)

NOW = 1_800_000_000.0


def node(name: str, domain: str = "", **fields: Any) -> NodeInfo:
    """An 8-GPU h100 node, its own NVLink domain unless told."""
    return NodeInfo(name, "h100", 8, 64_000, 512 * 1024, domain or name, **fields)


def running(name: str, queue: str, node_name: str, gpus: range) -> WorkloadInfo:
    """A running workload of ``queue``: one pod on ``gpus`` of ``node_name``."""
    return WorkloadInfo(
        name,
        queue,
        "normal",
        (PodSetInfo(1, len(gpus), ("h100",)),),
        0.0,
        state="running",
        placement=(PodPlacement(node_name, tuple(gpus)),),
    )


def broken_but_held() -> Snapshot:
    """h100-11: GPU 3 marked unhealthy while search's job runs on GPUs 0-3, speech's on 4-7;
    h100-12: search on 0-1, the rest free."""
    return Snapshot(
        flavors=(FlavorInfo("h100"),),
        nodes=(node("h100-11", unhealthy_gpus=frozenset({3})), node("h100-12")),
        queues=(
            QueueInfo("root", None),
            QueueInfo("search", "root", "search"),
            QueueInfo("speech", "root", "speech"),
        ),
        priority_classes=(PriorityClassInfo("normal", 0, default=True),),
        workloads=(
            running("index", "search", "h100-11", range(4)),
            running("asr", "speech", "h100-11", range(4, 8)),
            running("rank", "search", "h100-12", range(2)),
        ),
    )


def test_a_broken_gpu_work_still_holds_counts_once_as_its_holders_everywhere() -> None:
    pool = broken_but_held()
    cycle = Cycle(pool, PolicyInfo(), NOW)
    rows = gpu_rows(pool)
    # The cell: coloured by its holder, its hover says it is broken and who holds it.
    cell = rows[0].cells[3]
    assert (cell.state, cell.category, cell.free_milli) == (BROKEN, "search", 0)
    assert describe(rows[0], cell, {"h100-11": {3: "XID 79"}}) == (
        "h100-11 GPU 3 (domain h100-11): broken: XID 79; search 1 GPU until its work leaves"
    )
    # The legend: search holds what the core's quota tree says it holds (the Queues page's
    # figure), free is the core's free, and the colours add up to the cells.
    counts = legend_counts(rows)
    for team in ("search", "speech"):
        assert counts[team] == cycle.quota.usage[team]["h100"] / MILLI
    assert counts["search"] == 6
    (card,) = flavor_fragmentation(cycle.cluster, {})
    assert counts[FREE] == card.free_gpus == 6
    assert BROKEN not in counts  # the one broken GPU is search's until its work leaves
    assert sum(counts.values()) == 16
    # The per-domain table: h100-11's 8 GPUs once, the broken one search's.
    summaries = domain_summaries(rows)
    eleven = summaries[0]
    assert (eleven.gpus, eleven.broken, eleven.free_gpus) == (8, 0, 0)
    assert sum(eleven.by_tenant.values()) + eleven.broken + eleven.free_gpus == eleven.gpus
    assert eleven.held_by() == "search 4 GPUs (1 broken), speech 4 GPUs"
    assert free_spread(summaries).gpus == card.free_gpus


def test_a_broken_gpu_nobody_holds_is_broken_in_the_legend_and_the_table() -> None:
    pool = broken_but_held()
    pool = Snapshot(pool.flavors, pool.nodes, pool.queues, pool.priority_classes, ())
    rows = gpu_rows(pool)
    assert rows[0].cells[3].category == BROKEN
    assert legend_counts(rows) == {FREE: 15, BROKEN: 1}
    assert domain_summaries(rows)[0].broken == 1


# ----------------------------------------------------------------------------- drain


def place_on_n2(pool: Any, name: str, gpus: list[int]) -> None:
    """An nlp workload admitted onto ``gpus`` of n2."""
    workload = do_submit_workload(
        name,
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=len(gpus), flavor=pool.h100)],
    )
    do_transition_workload(
        workload,
        "admitted",
        reason="test",
        placements=[PlacementSpec("main", 0, Node.objects.get(name="n2"), gpus)],
    )


def test_draining_asks_first_saying_how_many_workloads_are_evicted_and_that_pdbs_hold(
    pool: Any, page_as: Any
) -> None:
    place_on_n2(pool, "a", [0, 1])
    place_on_n2(pool, "b", [2])
    page = text(page_as("ada").get("/cluster/"))
    n2 = page[page.index('id="node-n2"') :]
    # One click opens the confirmation (a plain form inside <details>: no script needed).
    assert "<summary>Drain: evict its work…</summary>" in n2
    assert "evicts the 2 workloads placed on it" in n2
    assert "PodDisruptionBudgets are honoured" in n2
    assert "Why (optional, kept in the audit log)" in n2
    assert "Yes, drain n2</button>" in n2
    assert Node.objects.get(name="n2").drain_requested_at is None  # reading drains nothing
    n1 = page[page.index('id="node-n1"') : page.index('id="node-n2"')]
    assert "whatever is placed on it (no workload now)" in n1


def test_the_confirmed_drain_keeps_its_reason_in_the_audit_log(pool: Any, page_as: Any) -> None:
    response = page_as("ada").post(
        "/cluster/nodes/n2/drain/", {"reason": "RMA: fans", "query": "flavor=h100"}
    )
    assert response.status_code == 302 and response["Location"] == "/cluster/?flavor=h100"
    event = AuditEvent.objects.get(action="inventory.drain_node")
    assert (event.actor_name, event.reason) == ("ada", "RMA: fans")


def test_a_drain_whose_form_is_wrong_drains_nothing_and_says_why(pool: Any, page_as: Any) -> None:
    response = page_as("ada").post("/cluster/nodes/n2/drain/", {"reason": "x" * 401}, follow=True)
    assert Node.objects.get(name="n2").drain_requested_at is None
    assert not AuditEvent.objects.filter(action="inventory.drain_node").exists()
    assert "n2 was not drained: Why:" in text(response)


# ----------------------------------------------------------------------------- money


@pytest.mark.parametrize(
    ("value", "places", "want"),
    [
        ("13418.23", 2, "13,418.23"),
        ("17086.4", 2, "17,086.40"),
        (Decimal("2.5000"), PRICE_PLACES, "2.50"),
        (Decimal("0.0125"), PRICE_PLACES, "0.0125"),
        (Decimal("1234567.005"), 2, "1,234,567.00"),
        ("-0.001", 2, "0.00"),
        (0, 2, "0.00"),
    ],
    ids=["separated", "cents written", "price", "price to the fourth", "millions", "no -0", "0"],
)
def test_money_is_separated_to_the_cent(value: Any, places: int, want: str) -> None:
    assert money(value, places) == want


def test_the_money_filters_write_money_and_prices_per_gpu_hour() -> None:
    assert (money_filter("4734.905"), price("2.5000")) == ("4,734.90", "2.50")
    assert (money_filter(None), price("")) == ("\u2013", "\u2013")


@pytest.fixture
def rolled_with_a_queue_of_no_team(pool: Any) -> str:
    """The page tests' pool (15 healthy h100 GPUs at 2.50 per GPU-hour) and a queue of no
    team, ``shared``, guaranteed 2 h100 GPUs it never uses; two hours of nlp on 6 GPUs
    rolled up: ``shared`` is charged 4 GPU-hours of reserved idle (10.00). The month."""
    shared = queue("shared", parent=pool.root)
    quota(shared, pool.h100, 2, 2, 4)
    t0 = (timezone.now() + timedelta(days=2)).replace(hour=10, minute=0, second=0, microsecond=0)
    do_roll_up_usage(until=t0)
    workload = do_submit_workload(
        "nlp-job",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=6, flavor=pool.h100)],
        at=t0,
    )
    do_open_usage(workload, flavor=pool.h100, gpus=6, at=t0)
    do_close_usage(workload, at=t0 + timedelta(hours=2))
    do_roll_up_usage(until=t0 + timedelta(hours=2))
    return t0.strftime("%Y-%m")


def row_cells(page: str, row_start: str) -> list[str]:
    """The texts of the cells of the table row that starts with ``row_start``."""
    row = page.split(row_start, 1)[1].split("</tr>", 1)[0]
    return [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>.*?</td>", row)]


def test_the_cost_page_writes_money_to_the_cent_and_prices_per_gpu_hour(
    rolled_with_a_queue_of_no_team: str, page_as: Any
) -> None:
    page = text(page_as("fin").get(f"/cost/?month={rolled_with_a_queue_of_no_team}"))
    assert row_cells(page, "<tr><td>nlp</td>")[-3:] == ["30.00", "0.00", "30.00"]
    prices = page.split('id="prices-title"', 1)[1]
    assert row_cells(prices, "<tr><td>h100</td>")[1:] == ["2.50", "15 GPUs", "37.50"]
    assert "2.5000" not in prices
    assert "at the prices per GPU-hour in force" in page


def test_the_charge_of_the_queues_of_no_team_is_named_on_the_page_and_in_the_csv(
    rolled_with_a_queue_of_no_team: str, page_as: Any
) -> None:
    month = rolled_with_a_queue_of_no_team
    client = page_as("fin")
    page = text(client.get(f"/cost/?month={month}"))
    # reserved idle 4 GPU-h, charged 4 GPU-h and 10.00
    labelled = row_cells(page, f'<a href="#no-team">{html.escape(NO_TEAM)}</a></td>')
    assert (labelled[2], labelled[5], labelled[-1]) == ("4 GPU-h", "4 GPU-h", "10.00")
    note = page.split('id="no-team"', 1)[1].split("</p>", 1)[0]
    assert "(shared)" in note and "reserved idle" in note
    assert f'"{NO_TEAM}"' in page.split('id="trend-chart-figure"', 1)[1]  # the trend's trace
    link = re.search(r'id="csv-teams" href="([^"]+)"', page)
    assert link is not None
    answer = client.get(html.unescape(link.group(1)))
    body = b"".join(answer.streaming_content).decode()
    rows = {row["tenant"]: row for row in csv.DictReader(io.StringIO(body))}
    assert set(rows) == {"nlp", "vision", NO_TEAM}
    assert Decimal(rows[NO_TEAM]["reserved_idle_cost"]) == 10
    assert "," not in rows["nlp"]["used_cost"]  # machine-readable: no separators
