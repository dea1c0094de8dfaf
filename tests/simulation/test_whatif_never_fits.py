"""What-if replays and work that never fits: each replay sets aside, as the core's enqueue
does, the jobs its own setup can never run (a gang larger than a capability on its queue's
path, or than the pool), and says how many and why, instead of failing with "jobs never
finish"; a proposal that raises the capability such a job needs lets it in, and it runs."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from domain_builders import explained, flavor, node, priority_class, queue, quota, tenant

from gpupool.scheduler.types import (
    MILLI,
    FlavorInfo,
    NodeInfo,
    PodSetInfo,
    PolicyInfo,
    QueueInfo,
    QuotaInfo,
)
from gpupool.simulation.queueing.events import ClusterSetup, SimJob
from gpupool.simulation.queueing.whatif import (
    QuotaChange,
    apply_changes,
    replay_whatif,
    set_aside,
)
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

HOUR = 3600.0
QUEUES = (
    QueueInfo("root", None),
    QueueInfo("a", "root", tenant="a", quota={"h100": QuotaInfo(0, 2 * MILLI, 4 * MILLI)}),
    QueueInfo("b", "root", tenant="b", quota={"h100": QuotaInfo(0, 6 * MILLI, 6 * MILLI)}),
)
NODES = (NodeInfo("n1", "h100", 8, 96_000, 1 << 20, "n1"),)
FLAVORS = (FlavorInfo("h100"),)


def job(name: str, gpus: int, at: float = 0.0, queue: str = "a") -> SimJob:
    """A one-pod job of an hour."""
    pods = (PodSetInfo(count=1, gpus=gpus, flavors=("h100",)),)
    return SimJob(name, queue, pods, submitted_at=at, duration_s=HOUR)


def test_a_job_larger_than_its_queues_capability_is_set_aside_with_the_cores_reason() -> None:
    cluster = ClusterSetup(FLAVORS, NODES, QUEUES)
    aside = set_aside([job("fits", 4), job("too-big", 6)], cluster, PolicyInfo())
    assert [(a.job, a.queue, a.reason) for a in aside] == [("too-big", "a", "quota")]
    assert aside[0].detail == (
        "Queue a can never hold 6 h100 GPUs: the capabilities on its path allow 4."
    )


def test_a_job_larger_than_the_pool_is_set_aside_as_capacity() -> None:
    cluster = ClusterSetup(FLAVORS, NODES, QUEUES)
    roomy = apply_changes(QUEUES, [QuotaChange("a", "h100", capability=16)])
    pods = (PodSetInfo(count=2, gpus=8, flavors=("h100",)),)
    wide = SimJob("wide", "a", pods, submitted_at=0, duration_s=HOUR)
    aside = set_aside([wide], ClusterSetup(FLAVORS, NODES, roomy), PolicyInfo())
    assert [(a.job, a.reason) for a in aside] == [("wide", "capacity")]
    assert set_aside([wide], cluster, PolicyInfo())[0].reason == "quota"  # the first layer


def test_a_whatif_with_never_fitting_work_succeeds_and_says_it_set_it_aside() -> None:
    demand = [job("a-0", 2), job("a-big", 6, at=1.0), job("b-0", 2, queue="b")]
    result = replay_whatif(demand, QUEUES, QUEUES, nodes=NODES, flavors=FLAVORS)
    assert [a.job for a in result.set_aside_before] == ["a-big"]
    assert [a.job for a in result.set_aside_after] == ["a-big"]
    assert result.jobs == 3 and result.tenants_before["a"].jobs == 1
    document = result.to_json()["set_aside"]
    assert document["before"] == {
        "count": 1,
        "reasons": {"quota": 1},
        "jobs": [
            {
                "job": "a-big",
                "queue": "a",
                "reason": "quota",
                "detail": "Queue a can never hold 6 h100 GPUs: the capabilities on its path "
                "allow 4.",
            }
        ],
    }


def test_a_proposal_raising_the_capability_includes_the_work_and_runs_it() -> None:
    demand = [job("a-0", 2), job("a-big", 6, at=1.0), job("b-0", 2, queue="b")]
    proposed = apply_changes(QUEUES, [QuotaChange("a", "h100", capability=6)])
    result = replay_whatif(
        demand, QUEUES, proposed, nodes=NODES, flavors=FLAVORS, window_s=3 * HOUR
    )
    assert [a.job for a in result.set_aside_before] == ["a-big"]
    assert result.set_aside_after == ()
    # today a runs one job of 2 GPUs for an hour; with the change the big one (6) too
    assert (result.tenants_before["a"].jobs, result.tenants_after["a"].jobs) == (1, 2)
    assert result.tenants_before["a"].gpu_hours == pytest.approx(2.0)
    assert result.tenants_after["a"].gpu_hours == pytest.approx(8.0)


@pytest.fixture
def pool_with_never_fitting_work() -> None:
    """One 8-GPU node; team-a (deserves 2, may hold 4) queued yesterday a 2-GPU job of an hour
    and a 6-GPU one that its capability can never hold, which the loop set aside."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    priority_class("normal", default=True)
    root = queue("root")
    a = queue("team-a", root, tenant=tenant("a"))
    b = queue("team-b", root, tenant=tenant("b"))
    quota(a, h100, 0, 2, 4)
    quota(b, h100, 0, 6, 6)
    yesterday = timezone.now() - timedelta(days=1)
    for name, gpus in (("small", 2), ("big", 6)):
        workload = do_submit_workload(
            name,
            queue=a,
            pod_sets=[PodSetSpec(name="main", count=1, gpus=gpus, flavor=h100)],
            expected_runtime_s=int(HOUR),
            at=yesterday,
        )
    explained(
        workload,
        "quota",
        "Queue team-a can never hold 6 h100 GPUs: the capabilities on its path allow 4.",
        {"never_fits": True, "queue": "team-a", "flavor": "h100"},
    )


def whatif(*arguments: str) -> dict[str, object]:
    """``simulate whatif --json`` with the arguments; its document."""
    out = StringIO()
    call_command("gpupool", "simulate", "whatif", *arguments, "--json", stdout=out)
    document: dict[str, object] = json.loads(out.getvalue())
    return document


@pytest.mark.django_db
def test_the_whatif_command_on_a_pool_holding_never_fitting_work_sets_it_aside(
    pool_with_never_fitting_work: None,
) -> None:
    document = whatif("--set-quota", "team-b:h100:deserved=4")
    aside = document["set_aside"]
    assert isinstance(aside, dict)
    assert (aside["before"]["count"], aside["after"]["count"]) == (1, 1)
    assert aside["before"]["jobs"][0]["job"] == "default/big"
    table = StringIO()
    call_command("gpupool", "simulate", "whatif", stdout=table)
    assert "set aside as never fitting today: 1 (1 quota)" in table.getvalue()
    assert "default/big: Queue team-a can never hold 6 h100 GPUs" in table.getvalue()


@pytest.mark.django_db
def test_the_whatif_command_raising_the_capability_runs_the_never_fitting_work(
    pool_with_never_fitting_work: None,
) -> None:
    document = whatif("--set-quota", "team-a:h100:deserved=2,capability=6")
    aside = document["set_aside"]
    assert isinstance(aside, dict)
    assert (aside["before"]["count"], aside["after"]["count"]) == (1, 0)
    tenants = document["tenants"]
    assert isinstance(tenants, dict)
    assert (tenants["a"]["before"]["jobs"], tenants["a"]["after"]["jobs"]) == (1, 2)
