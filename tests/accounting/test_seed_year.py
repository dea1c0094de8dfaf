"""gpupool seed-year loads a seeded year of the asked size, valid row by row, and rolls it up.

A small year here (B5's is 500,000 workloads; docs/benchmarks.md has its timings).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from io import StringIO
from typing import Any

import numpy as np
import pytest
from django.core.management import call_command
from django.db import transaction
from django.db.models import Sum

from gpupool.accounting.bulk.year import Gang, NodeRoom, YearShape, pack_gangs, plan_year
from gpupool.accounting.models import (
    CapacitySample,
    FlavorDay,
    PreemptionEvent,
    UsageDay,
    UsageInterval,
    WorkloadDay,
)
from gpupool.control.models import SchedulingCycle
from gpupool.control.snapshot import build_snapshot
from gpupool.quotas.models import Queue
from gpupool.scheduler import plan
from gpupool.scheduler.types import PolicyInfo
from gpupool.tenancy.models import Tenant
from gpupool.workloads.models import Placement, PodSet, Workload, WorkloadTransition

pytestmark = pytest.mark.django_db

END = "2026-03-15T00:00:00Z"
SMALL = [
    "--tenants=6",
    "--queues=14",
    "--workloads=300",
    "--intervals=1500",
    "--preemptions=25",
    "--days=5",
    f"--end={END}",
]


def seed_year(*arguments: str) -> dict:
    out = StringIO()
    call_command("gpupool", "seed-year", *arguments, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def year(django_db_setup: Any, django_db_blocker: Any) -> Iterator[dict]:
    """One small year for the whole module, rolled back after its last test (as Django's
    setUpTestData does)."""
    with django_db_blocker.unblock():
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            yield seed_year(*SMALL)
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


def test_the_year_has_the_asked_sizes(year: dict) -> None:
    assert (Tenant.objects.count(), Queue.objects.count()) == (6, 14)
    assert (Workload.objects.count(), PodSet.objects.count()) == (300, 300)
    assert UsageInterval.objects.count() == 1500
    assert PreemptionEvent.objects.count() == 25
    assert WorkloadTransition.objects.count() == year["counts"]["workload_transitions"] > 300
    assert year["rolled_up_hours"] == 5 * 24
    last = SchedulingCycle.objects.get()
    assert (last.status, last.finished_at) == ("succeeded", datetime(2026, 3, 15, tzinfo=UTC))


def test_the_year_s_preemptions_have_only_the_reasons_the_design_names(year: dict) -> None:
    """DESIGN §2: a budget that runs out demotes its work and never evicts it; an idle
    workload's end is not drawn by the generator."""
    reasons = set(PreemptionEvent.objects.values_list("reason", flat=True))
    assert reasons and reasons <= {"preempt", "reclaim", "node-failure", "admin"}


def test_every_loaded_row_passes_its_models_rules(year: dict) -> None:
    for model in (Workload, PodSet, UsageInterval, PreemptionEvent, WorkloadTransition):
        for row in model.objects.all()[:100]:  # type: ignore[attr-defined]
            row.full_clean()


def test_the_roll_up_holds_every_gpu_hour_of_the_intervals(year: dict) -> None:
    end = datetime.fromisoformat(END.replace("Z", "+00:00"))
    held = sum((interval.gpu_hours(end) for interval in UsageInterval.objects.all()), Decimal(0))
    rolled = UsageDay.objects.aggregate(total=Sum("gpu_hours"))["total"]
    assert abs(rolled - held) < Decimal("0.01")
    assert WorkloadDay.objects.aggregate(total=Sum("gpu_hours"))["total"] == pytest.approx(
        rolled, abs=Decimal("0.01")
    )


def test_each_day_of_each_flavor_adds_up_to_its_healthy_capacity(year: dict) -> None:
    lines = ("used_within_guarantee", "reserved_idle", "used_above_guarantee", "pool_idle")
    days = list(FlavorDay.objects.all())
    assert len(days) == 5 * 3
    for day in days:
        assert all(getattr(day, line) >= 0 for line in lines)
        assert sum(getattr(day, line) for line in lines) == day.capacity
    assert CapacitySample.objects.count() == year["counts"]["capacity_samples"]


def test_the_same_seed_plans_the_same_year() -> None:
    end = datetime(2026, 3, 15, tzinfo=UTC)
    shape = YearShape(tenants=6, queues=14, workloads=300, intervals=1500, preemptions=20, days=5)
    first, again = plan_year(shape, seed=3, end=end), plan_year(shape, seed=3, end=end)
    for table in ("workloads", "intervals", "preemptions", "transitions"):
        mine, theirs = getattr(first, table), getattr(again, table)
        assert all(
            np.array_equal(mine[k], theirs[k], equal_nan=True)
            for k in mine
            if mine[k].dtype != object
        )
    assert first.quotas == again.quotas and first.failures == again.failures


def test_a_pool_that_is_not_empty_is_refused(year: dict) -> None:
    err = StringIO()
    with pytest.raises(SystemExit) as exit_status:
        call_command("gpupool", "seed-year", *SMALL, stderr=err)
    assert exit_status.value.code == 2
    assert "empty pool" in err.getvalue()


def test_sizes_that_cannot_be_planned_name_the_option() -> None:
    err = StringIO()
    with pytest.raises(SystemExit) as exit_status:
        call_command("gpupool", "seed-year", "--tenants=10", "--queues=5", stderr=err)
    assert exit_status.value.code == 2
    assert "--queues" in err.getvalue()


def test_the_running_work_is_placed_whole_on_free_gpus_of_its_flavor(year: dict) -> None:
    running = Workload.objects.filter(state="running").prefetch_related("pod_sets")
    assert running.exists()
    seen: set[tuple[int, int]] = set()
    for workload in running:
        (pod_set,) = workload.pod_sets.all()
        placements = list(Placement.objects.filter(pod_set=pod_set).select_related("node"))
        assert sorted(p.pod_index for p in placements) == list(range(pod_set.count))
        for placement in placements:
            placement.full_clean()  # the node's flavor, its GPUs, the pod's GPU count
            for index in placement.gpu_indices:
                assert (placement.node_id, index) not in seen  # each GPU to one pod
                seen.add((placement.node_id, index))
    assert Placement.objects.count() == year["counts"]["placements"]


def test_the_seeded_pools_snapshot_builds_and_plans(year: dict) -> None:
    now = datetime.fromisoformat(END.replace("Z", "+00:00"))
    database = build_snapshot(now=now, policy=PolicyInfo())
    placed = [w for w in database.snapshot.workloads if w.state == "running"]
    assert len(placed) == Workload.objects.filter(state="running").count()
    assert all(w.placement for w in placed)
    planned = plan(database.snapshot, PolicyInfo(), database.now)
    assert planned is not None


def test_placements_only_places_a_year_loaded_without_them(year: dict) -> None:
    with transaction.atomic():
        before = list(Placement.objects.values_list("pod_set_id", "pod_index", "node_id"))
        cycles = SchedulingCycle.objects.count()
        Placement.objects.all().delete()  # a year seeded before seed-year placed its work
        placed = seed_year("--placements-only")
        assert placed["placements"] == len(before) > 0
        assert Placement.objects.count() == len(before)
        assert SchedulingCycle.objects.count() == cycles + 1  # the pages read the pool anew
        assert seed_year("--placements-only")["placements"] == 0  # nothing lacks one now
        assert SchedulingCycle.objects.count() == cycles + 1
        transaction.set_rollback(True)


def test_a_gang_stays_in_one_nvlink_domain_when_one_has_room() -> None:
    nodes = [
        NodeRoom("a-0", "gb200", "nvl-a", (0, 1, 2, 3)),
        NodeRoom("a-1", "gb200", "nvl-a", (2, 3)),
        NodeRoom("b-0", "gb200", "nvl-b", (0, 1, 2, 3)),
        NodeRoom("b-1", "gb200", "nvl-b", (0, 1, 2, 3)),
        NodeRoom("h-0", "h100", "h-0", (0, 1, 2, 3, 4, 5, 6, 7)),
    ]
    packed = pack_gangs(nodes, [Gang(1, "t/two", "gb200", 2, 4), Gang(2, "t/one", "gb200", 1, 2)])
    assert packed[1] == [("b-0", [0, 1, 2, 3]), ("b-1", [0, 1, 2, 3])]
    assert packed[2] == [("a-1", [2, 3])]  # the fullest node that fits


def test_work_that_does_not_fit_is_named() -> None:
    nodes = [NodeRoom("h-0", "h100", "h-0", (0, 1, 2, 3, 4, 5, 6, 7))]
    with pytest.raises(ValueError, match="t/big: 2 pods of 8 h100 GPUs do not fit"):
        pack_gangs(nodes, [Gang(1, "t/big", "h100", 2, 8)])
