"""What-if: parsing a proposed quota, replaying demand before/after, on DB rows and the CLI."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from domain_builders import flavor, node, priority_class, queue, quota, tenant

from gpupool.scheduler.types import MILLI, FlavorInfo, NodeInfo, PodSetInfo, QueueInfo, QuotaInfo
from gpupool.simulation.events import SimJob
from gpupool.simulation.whatif import (
    QuotaChange,
    apply_changes,
    parse_quota_change,
    replay_whatif,
)
from gpupool.simulation.whatif_db import recorded_demand
from gpupool.workloads.actions import (
    PodPlacement,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)

HOUR = 3600.0


def test_parse_quota_change() -> None:
    """QUEUE:FLAVOR:deserved=N[,capability=M] in GPUs."""
    assert parse_quota_change("nlp:h100:deserved=6,capability=12") == QuotaChange(
        "nlp", "h100", deserved=6, capability=12
    )
    assert parse_quota_change("nlp:a100-3g.40gb:deserved=2.5").deserved == 2.5


@pytest.mark.parametrize(
    "text", ["nlp:h100", "nlp:h100:weight=2", "nlp:h100:deserved=x", "nlp:h100:deserved=-1"]
)
def test_parse_refuses_malformed_changes(text: str) -> None:
    """Missing levels, unknown levels and non-numbers are refused with the text."""
    with pytest.raises(ValueError, match="nlp"):
        parse_quota_change(text)


QUEUES = (
    QueueInfo("root", None),
    QueueInfo("a", "root", tenant="a", quota={"h100": QuotaInfo(0, 2 * MILLI, 2 * MILLI)}),
    QueueInfo("b", "root", tenant="b", quota={"h100": QuotaInfo(0, 6 * MILLI, 6 * MILLI)}),
)


def test_apply_changes_keeps_order_and_checks_levels() -> None:
    """Deserved may grow capability along; guarantee <= deserved <= capability is enforced."""
    changed = apply_changes(QUEUES, [QuotaChange("a", "h100", deserved=6)])
    assert [q.name for q in changed] == ["root", "a", "b"]
    assert changed[1].quota["h100"] == QuotaInfo(0, 6 * MILLI, 6 * MILLI)
    with pytest.raises(ValueError, match="capability"):
        apply_changes(QUEUES, [QuotaChange("a", "h100", deserved=4, capability=3)])
    with pytest.raises(ValueError, match="unknown queue"):
        apply_changes(QUEUES, [QuotaChange("zzz", "h100", deserved=1)])


def test_replay_whatif_shows_who_gains_and_who_pays() -> None:
    """Moving 4 GPUs of deserved from b to a removes a's wait (no borrowing here)."""
    pods = (PodSetInfo(count=1, gpus=2, flavors=("h100",)),)
    demand = [SimJob(f"a-{i}", "a", pods, submitted_at=0, duration_s=HOUR) for i in range(3)]
    demand.append(SimJob("b-1", "b", pods, submitted_at=0, duration_s=HOUR))
    changes = [
        QuotaChange("a", "h100", deserved=6),
        QuotaChange("b", "h100", deserved=2, capability=2),
    ]
    proposed = apply_changes(QUEUES, changes)
    result = replay_whatif(
        demand,
        QUEUES,
        proposed,
        nodes=(NodeInfo("n1", "h100", 8, 96_000, 1 << 20, "n1"),),
        flavors=(FlavorInfo("h100"),),
        window_s=3 * HOUR,
        changes=changes,
    )
    a_before, a_after = result.tenants_before["a"], result.tenants_after["a"]
    assert a_before.wait_mean_s == pytest.approx(HOUR)  # 0, 1 h and 2 h
    assert a_after.wait_mean_s == 0
    assert result.tenants_after["b"].wait_mean_s == 0
    assert a_after.deserved_gpus == 6
    assert a_before.utilisation_of_deserved == pytest.approx(6 / (2 * 3))
    document = result.to_json()
    assert document["tenants"]["a"]["before"]["wait_mean_s"] == 3600
    assert document["changes"][0] == {"queue": "a", "flavor": "h100", "deserved": 6}


@pytest.fixture
def recorded_pool() -> dict[str, object]:
    """One 8-GPU node; team a (2 GPUs) ran three 2-GPU jobs of an hour yesterday, team b idle."""
    h100 = flavor("h100")
    n1 = node("n1", h100, gpus=8)
    priority_class("normal", default=True)
    root = queue("root")
    a = queue("team-a", root, tenant=tenant("a"))
    b = queue("team-b", root, tenant=tenant("b"))
    quota(root, h100, 0, 8, 8)
    quota(a, h100, 0, 2, 2)
    quota(b, h100, 0, 6, 6)
    now = timezone.now()
    submitted = now - timedelta(days=1)
    for i in range(3):
        workload = do_submit_workload(
            f"a-{i}",
            queue=a,
            pod_sets=[PodSetSpec(name="main", count=1, gpus=2, flavor=h100)],
            at=submitted,
        )
        start = submitted + timedelta(hours=i)
        placed = [PodPlacement("main", 0, n1, [0, 1])]
        do_transition_workload(workload, "admitted", reason="test", at=start, placements=placed)
        do_transition_workload(workload, "running", reason="test", at=start)
        do_transition_workload(workload, "succeeded", reason="test", at=start + timedelta(hours=1))
    do_submit_workload(
        "old",
        queue=a,
        pod_sets=[PodSetSpec(name="main", count=1, gpus=2, flavor=h100)],
        expected_runtime_s=600,
        at=now - timedelta(days=40),
    )
    do_submit_workload(
        "a-cpu", queue=a, pod_sets=[PodSetSpec(name="main", count=1, gpus=0)], at=submitted
    )
    return {"now": now}


@pytest.mark.django_db
def test_recorded_demand_reads_the_window(recorded_pool: dict[str, object]) -> None:
    """Three finished 1-hour jobs in the window; the old one and the CPU-only one stay out."""
    demand = recorded_demand(30, timezone.now())
    assert sorted(job.name for job in demand.jobs) == ["a-0", "a-1", "a-2"]
    assert all(job.duration_s == pytest.approx(HOUR) for job in demand.jobs)
    assert demand.skipped["no GPU"] == 1
    assert sum(n.gpus for n in demand.nodes) == 8
    assert {q.name for q in demand.queues} == {"root", "team-a", "team-b"}


@pytest.mark.django_db
def test_cli_whatif_on_recorded_workloads(recorded_pool: dict[str, object]) -> None:
    """Giving team-a 6 GPUs of deserved ends its waits; the JSON says before and after."""
    out = StringIO()
    call_command(
        "gpupool",
        "simulate",
        "whatif",
        "--days",
        "30",
        "--set-quota",
        "team-a:h100:deserved=6,capability=6",
        "--set-quota",
        "team-b:h100:deserved=2,capability=2",
        "--json",
        stdout=out,
    )
    document = json.loads(out.getvalue())
    assert document["jobs"] == 3
    a = document["tenants"]["a"]
    assert a["before"]["wait_mean_s"] == pytest.approx(HOUR)
    assert a["after"]["wait_mean_s"] == 0
    assert a["after"]["deserved_gpus"] == 6


@pytest.mark.django_db
def test_cli_whatif_table_and_bad_change(recorded_pool: dict[str, object]) -> None:
    """Without --json a before/after table; an unknown queue is refused with exit status 2."""
    out = StringIO()
    call_command(
        "gpupool", "simulate", "whatif", "--set-quota", "team-a:h100:deserved=4", stdout=out
    )
    assert "before" in out.getvalue() and "per tenant" in out.getvalue()
    err = StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "gpupool", "simulate", "whatif", "--set-quota", "nope:h100:deserved=1", stderr=err
        )
    assert exit_info.value.code == 2
    assert "unknown queue" in err.getvalue()


@pytest.mark.django_db
def test_recorded_demand_keeps_flavor_choices_in_order() -> None:
    """A pod set that may run on h100, then a100, is replayed with both choices, in order."""
    h100 = flavor("h100")
    a100 = flavor("a100")
    node("n1", h100, gpus=8)
    priority_class("normal", default=True)
    root = queue("root")
    a = queue("team-a", root, tenant=tenant("a"))
    quota(a, h100, 0, 8, 8)
    quota(a, a100, 0, 8, 8)
    spec = PodSetSpec(name="main", count=1, gpus=2, flavor=h100, flavor_choices=[a100])
    do_submit_workload(
        "either",
        queue=a,
        pod_sets=[spec],
        expected_runtime_s=600,
        at=timezone.now() - timedelta(hours=1),
    )
    demand = recorded_demand(30, timezone.now())
    [job] = demand.jobs
    assert [pod_set.flavors for pod_set in job.pod_sets] == [("h100", "a100")]
