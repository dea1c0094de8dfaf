"""What-if: parsing a proposed quota, replaying demand before/after, on DB rows and the CLI."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone
from domain_builders import flavor, node, priority_class, queue, quota, tenant

from gpupool.scheduler.types import (
    MILLI,
    FlavorInfo,
    NodeInfo,
    PodSetInfo,
    PolicyInfo,
    QueueInfo,
    QuotaInfo,
)
from gpupool.simulation.queueing.events import SimJob, SimPolicy
from gpupool.simulation.queueing.whatif import (
    QuotaChange,
    apply_changes,
    apply_policy_changes,
    parse_policy_change,
    parse_quota_change,
    replay_whatif,
)
from gpupool.simulation.queueing.whatif_db import recorded_demand
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)

HOUR = 3600.0


def test_a_quota_change_is_read_in_gpus() -> None:
    """QUEUE:FLAVOR:deserved=N[,capability=M] in GPUs."""
    assert parse_quota_change("nlp:h100:deserved=6,capability=12") == QuotaChange(
        "nlp", "h100", deserved=6, capability=12
    )
    assert parse_quota_change("nlp:a100-3g.40gb:deserved=2.5").deserved == 2.5


@pytest.mark.parametrize(
    "text", ["nlp:h100", "nlp:h100:weight=2", "nlp:h100:deserved=x", "nlp:h100:deserved=-1"]
)
def test_malformed_quota_changes_are_refused(text: str) -> None:
    """Missing levels, unknown levels and non-numbers are refused with the text."""
    with pytest.raises(ValueError, match="nlp"):
        parse_quota_change(text)


QUEUES = (
    QueueInfo("root", None),
    QueueInfo("a", "root", tenant="a", quota={"h100": QuotaInfo(0, 2 * MILLI, 2 * MILLI)}),
    QueueInfo("b", "root", tenant="b", quota={"h100": QuotaInfo(0, 6 * MILLI, 6 * MILLI)}),
)


def test_applying_quota_changes_keeps_the_order_and_checks_the_levels() -> None:
    """Deserved may grow capability along; guarantee <= deserved <= capability is enforced."""
    changed = apply_changes(QUEUES, [QuotaChange("a", "h100", deserved=6)])
    assert [q.name for q in changed] == ["root", "a", "b"]
    assert changed[1].quota["h100"] == QuotaInfo(0, 6 * MILLI, 6 * MILLI)
    with pytest.raises(ValueError, match="capability"):
        apply_changes(QUEUES, [QuotaChange("a", "h100", deserved=4, capability=3)])
    with pytest.raises(ValueError, match="unknown queue"):
        apply_changes(QUEUES, [QuotaChange("zzz", "h100", deserved=1)])
    with pytest.raises(ValueError, match="unknown flavor 'a100'"):
        apply_changes(QUEUES, [QuotaChange("a", "a100", deserved=1)], flavors={"h100"})


def test_the_whatif_shows_who_gains_and_who_pays() -> None:
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


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("queueing=fifo", ("queueing", "fifo")),
        ("fair_sharing=false", ("fair_sharing", False)),
        ("starvation_limit_s=21600", ("starvation_limit_s", 21600)),
        ('phases=["enqueue","allocate"]', ("phases", ["enqueue", "allocate"])),
        ("preemption_backoff=null", ("preemption_backoff", None)),
    ],
)
def test_a_policy_change_is_read_as_json_else_as_text(
    text: str, parsed: tuple[str, object]
) -> None:
    """KEY=VALUE, the value read as JSON when it is JSON, else as a string."""
    assert parse_policy_change(text) == parsed


def test_applying_policy_changes_keeps_the_rest_and_names_bad_keys() -> None:
    """Only the keys given change; a bad key or value is refused naming policy.<key>."""
    base = PolicyInfo(starvation_limit_s=3600)
    fifo = apply_policy_changes(base, {"queueing": "fifo"})
    assert fifo == PolicyInfo(starvation_limit_s=3600, queueing="fifo")
    assert apply_policy_changes(base, {"preemption_backoff": None}).backoff is None
    two = apply_policy_changes(base, {"phases": ["enqueue", "allocate"], "fair_sharing": False})
    assert (two.phases, two.queue_order, two.fair_reclaim, two.starvation_limit_s) == (
        ("enqueue", "allocate"),
        "head-rank",
        False,
        3600,
    )
    for bad, message in [
        ({"queueing": "lifo"}, "policy.queueing"),
        ({"wibble": 1}, "policy.wibble: unknown key"),
        ({"fair_sharing": "off"}, "policy.fair_sharing"),
        ({"phases": ["enqueue", "teleport"]}, "policy.phases"),
        ({"phases": ["enqueue", "preempt"]}, "must include 'allocate'"),
    ]:
        with pytest.raises(ValueError, match=message):
            apply_policy_changes(base, bad)


def test_the_whatif_compares_two_policies() -> None:
    """One 4-GPU queue: a 2-GPU job runs 2 h; a 4-GPU job and then a 2-GPU job arrive.

    Best-effort (today) lets the small job pass the blocked 4-GPU one and run at once; strict
    FIFO (proposed) holds it until the 4-GPU job has run: 2 h + 1 h later. The 4-GPU job
    waits 2 h either way.
    """
    one = (PodSetInfo(count=1, gpus=2, flavors=("h100",)),)
    four = (PodSetInfo(count=1, gpus=4, flavors=("h100",)),)
    demand = [
        SimJob("first", "a", one, submitted_at=0, duration_s=2 * HOUR),
        SimJob("big", "a", four, submitted_at=1, duration_s=HOUR),
        SimJob("small", "a", one, submitted_at=2, duration_s=HOUR),
    ]
    queues = (
        QueueInfo("root", None),
        QueueInfo("a", "root", tenant="a", quota={"h100": QuotaInfo(0, 4 * MILLI, 4 * MILLI)}),
    )
    today = SimPolicy("gpupool", PolicyInfo())
    proposed = SimPolicy("gpupool", apply_policy_changes(PolicyInfo(), {"queueing": "fifo"}))
    result = replay_whatif(
        demand,
        queues,
        queues,
        nodes=(NodeInfo("n1", "h100", 4, 96_000, 1 << 20, "n1"),),
        flavors=(FlavorInfo("h100"),),
        policy=today,
        proposed_policy=proposed,
        window_s=4 * HOUR,
        policy_changes={"queueing": "fifo"},
    )
    before, after = result.tenants_before["a"], result.tenants_after["a"]
    minute = 60.0
    # waits of first, big and small: (0, 2 h, ~0) before, (0, 2 h, 3 h) after
    assert before.wait_mean_s == pytest.approx(2 * HOUR / 3, abs=minute)
    assert after.wait_mean_s == pytest.approx(5 * HOUR / 3, abs=minute)
    assert result.after.jct_mean_s - result.before.jct_mean_s == pytest.approx(HOUR, abs=minute)
    assert result.to_json()["policy_changes"] == {"queueing": "fifo"}


def test_whatif_sets_aside_the_jobs_a_proposal_could_never_run() -> None:
    """Capping a's capability below its 2-GPU jobs would leave them pending for ever: the
    proposed replay sets them aside as the core does and says so (how many, which, the core's
    reason) instead of inventing waits for them."""
    pods = (PodSetInfo(count=1, gpus=2, flavors=("h100",)),)
    demand = [SimJob(f"a-{i}", "a", pods, submitted_at=0, duration_s=HOUR) for i in range(2)]
    proposed = apply_changes(QUEUES, [QuotaChange("a", "h100", deserved=1, capability=1)])
    result = replay_whatif(
        demand,
        QUEUES,
        proposed,
        nodes=(NodeInfo("n1", "h100", 8, 96_000, 1 << 20, "n1"),),
        flavors=(FlavorInfo("h100"),),
    )
    assert result.set_aside_before == ()
    assert [(job.job, job.reason) for job in result.set_aside_after] == [
        ("a-0", "quota"),
        ("a-1", "quota"),
    ]
    assert "a" in result.tenants_before and "a" not in result.tenants_after
    assert result.to_json()["set_aside"]["after"]["count"] == 2


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
        placed = [PlacementSpec("main", 0, n1, [0, 1])]
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
    """Three finished 1-hour jobs in the window (named namespace/name, as the core names them);
    the old one and the CPU-only one stay out."""
    demand = recorded_demand(30, timezone.now())
    assert sorted(job.name for job in demand.jobs) == ["default/a-0", "default/a-1", "default/a-2"]
    assert all(job.duration_s == pytest.approx(HOUR) for job in demand.jobs)
    assert demand.skipped["no GPU"] == 1
    assert sum(n.gpus for n in demand.nodes) == 8
    assert {q.name for q in demand.queues} == {"root", "team-a", "team-b"}


@pytest.mark.django_db
def test_whatif_shows_a_quota_change_ending_recorded_waits(
    recorded_pool: dict[str, object],
) -> None:
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
def test_whatif_prints_tables_and_refuses_an_unknown_queue(
    recorded_pool: dict[str, object],
) -> None:
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
def test_whatif_refuses_a_quota_of_a_flavor_the_pool_does_not_have(
    recorded_pool: dict[str, object],
) -> None:
    """It ran and exited 0, proposing a quota that changes nothing."""
    err = StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "gpupool", "simulate", "whatif", "--set-quota", "team-a:nope:deserved=5", stderr=err
        )
    assert exit_info.value.code == 2
    assert "unknown flavor 'nope'; have ['h100']" in err.getvalue()


@pytest.mark.django_db
def test_whatif_echoes_a_policy_change_and_refuses_bad_ones(
    recorded_pool: dict[str, object],
) -> None:
    """--set-policy proposes a policy setting; the JSON echoes it, a bad value exits 2."""
    out = StringIO()
    call_command(
        "gpupool",
        "simulate",
        "whatif",
        "--set-policy",
        "queueing=fifo",
        "--set-policy",
        "fair_sharing=false",
        "--json",
        stdout=out,
    )
    document = json.loads(out.getvalue())
    assert document["policy_changes"] == {"queueing": "fifo", "fair_sharing": False}
    assert document["changes"] == []
    table = StringIO()
    call_command("gpupool", "simulate", "whatif", "--set-policy", "queueing=fifo", stdout=table)
    assert 'proposed: queueing="fifo"' in table.getvalue()
    err = StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("gpupool", "simulate", "whatif", "--set-policy", "queueing=lifo", stderr=err)
    assert exit_info.value.code == 2
    assert "policy.queueing" in err.getvalue()
    err = StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "gpupool",
            "simulate",
            "whatif",
            "--set-policy",
            'phases=["enqueue"]',
            stderr=err,
        )
    assert exit_info.value.code == 2
    assert "policy.phases" in err.getvalue()


def whatif_on_the_philly_trace(*args: str) -> dict[str, Any]:
    """What ``simulate whatif --trace philly ... --json`` prints, parsed."""
    out = StringIO()
    call_command("gpupool", "simulate", "whatif", "--trace", "philly", *args, "--json", stdout=out)
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


@pytest.mark.usefixtures("sample_data")
def test_strict_fifo_queues_make_the_philly_sample_wait_longer() -> None:
    """Blocked heads hold back the jobs behind them: the mean wait grows."""
    document = whatif_on_the_philly_trace("--limit", "100", "--set-policy", "queueing=fifo")
    assert document["jobs"] == 100
    assert document["policy_changes"] == {"queueing": "fifo"}
    assert document["note"].startswith("philly trace, 100 jobs of each tenant's first 30 days")
    assert document["after"]["wait_mean_s"] > document["before"]["wait_mean_s"]


@pytest.mark.usefixtures("full_philly_jobs")
def test_strict_fifo_queues_make_the_published_philly_trace_wait_longer() -> None:
    """The trace's first 800 jobs under strict FIFO queues instead of best-effort: longer
    waits (blocked heads hold back the jobs behind them); nothing is preempted in either."""
    document = whatif_on_the_philly_trace("--limit", "800", "--set-policy", "queueing=fifo")
    assert document["jobs"] == 800
    before, after = document["before"], document["after"]
    assert after["wait_mean_s"] > before["wait_mean_s"]
    assert after["wait_p99_s"] > before["wait_p99_s"]
    assert after["preemptions"] == before["preemptions"] == 0


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
