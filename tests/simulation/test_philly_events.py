"""The virtual-time loop on tiny hand-checked traces: JCTs, reclaim, protection, checkpoints."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpupool.scheduler.types import (
    MILLI,
    FlavorInfo,
    NodeInfo,
    PodSetInfo,
    QueueInfo,
    QuotaInfo,
    VictimSearch,
)
from gpupool.simulation.queueing.events import (
    ClusterSetup,
    JobReplay,
    ReplayOutcome,
    SimJob,
    checkpointed_progress,
    replay_jobs,
)
from gpupool.simulation.queueing.metrics import fair_split, share_deviation, summarise
from gpupool.simulation.queueing.philly import QUEUEING_POLICIES


def job(name: str, gpus: int, at: float, duration: float) -> SimJob:
    """A one-pod job of queue ``name``'s prefix (``a-1`` goes to queue ``a``)."""
    pods = (PodSetInfo(count=1, gpus=gpus, flavors=("v100",)),)
    return SimJob(name, name.split("-")[0], pods, submitted_at=at, duration_s=duration)


def pool(quotas: dict[str, tuple[int, int]], gpus: int = 8) -> ClusterSetup:
    """One 8-GPU node and a leaf queue per entry: (deserved, capability) in GPUs."""
    queues = [QueueInfo("root", None)]
    for name, (deserved, capability) in quotas.items():
        quota = {"v100": QuotaInfo(0, deserved * MILLI, capability * MILLI)}
        queues.append(QueueInfo(name, "root", tenant=name, quota=quota))
    node = NodeInfo("n1", "v100", gpus, 96_000, 1 << 20, domain="n1")
    return ClusterSetup((FlavorInfo("v100"),), (node,), tuple(queues))


def by_name(outcome: ReplayOutcome) -> dict[str, tuple[float, float, int, float]]:
    """Per job: (JCT, wait, evictions, seconds of progress lost)."""
    return {r.job.name: (r.jct_s, r.wait_s, r.evictions, r.lost_s) for r in outcome.records}


TWO_TENANTS = [job("a-1", 4, 0, 100), job("a-2", 4, 0, 100), job("b-1", 4, 10, 50)]
BORROWING = {"a": (4, 8), "b": (4, 8)}


def test_kueue_like_reclaims_the_borrowed_job_at_once() -> None:
    """b reclaims its share from a's borrowed job at t=10; the victim restarts from zero."""
    outcome = replay_jobs(TWO_TENANTS, pool(BORROWING), QUEUEING_POLICIES["kueue-like"].sim)
    assert by_name(outcome) == {
        "a-1": (100, 0, 0, 0),
        "a-2": (160, 50, 1, 10),  # ran 0-10 (lost: no checkpoint yet), again 60-160
        "b-1": (50, 0, 0, 0),
    }
    assert outcome.preemptions == 1


def test_gpupool_waits_out_the_protected_window() -> None:
    """Within a's 30-minute protection b waits for a job to finish instead of evicting."""
    outcome = replay_jobs(TWO_TENANTS, pool(BORROWING), QUEUEING_POLICIES["gpupool"].sim)
    assert by_name(outcome) == {
        "a-1": (100, 0, 0, 0),
        "a-2": (100, 0, 0, 0),
        "b-1": (140, 90, 0, 0),
    }


def test_fifo_does_not_borrow() -> None:
    """With capability = deserved a's second job waits for its first."""
    outcome = replay_jobs(
        TWO_TENANTS, pool({"a": (4, 4), "b": (4, 4)}), QUEUEING_POLICIES["fifo"].sim
    )
    assert by_name(outcome) == {
        "a-1": (100, 0, 0, 0),
        "a-2": (200, 100, 0, 0),
        "b-1": (50, 0, 0, 0),
    }


def test_fifo_blocks_the_queue_behind_its_head() -> None:
    """A small job that fits waits behind the head that does not (head-of-line blocking)."""
    jobs = [job("a-1", 4, 0, 100), job("a-2", 4, 1, 100), job("a-3", 2, 2, 10)]
    quotas = {"a": (6, 6), "b": (2, 2)}
    fifo = by_name(replay_jobs(jobs, pool(quotas), QUEUEING_POLICIES["fifo"].sim))
    assert fifo["a-3"] == (108, 98, 0, 0)  # starts at 100 with a-2
    kueue = by_name(replay_jobs(jobs, pool(quotas), QUEUEING_POLICIES["kueue-like"].sim))
    assert kueue["a-3"] == (10, 0, 0, 0)  # backfills past the head at once


@pytest.mark.parametrize(
    ("ran", "kept"), [(0, 0), (1799, 0), (1800, 1800), (4000, 3600), (5400, 5400)]
)
def test_progress_is_kept_up_to_the_last_whole_checkpoint(ran: float, kept: float) -> None:
    """Progress survives up to the last 30-minute checkpoint."""
    assert checkpointed_progress(ran, 1800) == kept


def test_eviction_loses_progress_since_the_last_checkpoint() -> None:
    """Evicted after 4,000 s, a 4-GPU job keeps 3,600 s and loses 400 s (0.444 GPU-hours)."""
    jobs = [job("a-1", 4, 0, 10_000), job("a-2", 4, 0, 10_000), job("b-1", 4, 4000, 100)]
    outcome = replay_jobs(jobs, pool(BORROWING), QUEUEING_POLICIES["kueue-like"].sim)
    victim = next(r for r in outcome.records if r.job.name == "a-2")
    assert victim.evictions == 1
    assert victim.lost_s == pytest.approx(400)
    assert victim.lost_gpu_hours == pytest.approx(400 * 4 / 3600)
    assert victim.finished_at == pytest.approx(4100 + 6400)  # restarts when b-1 ends
    assert victim.run_s == pytest.approx(4000 + 6400)


def test_a_cycle_beat_delays_admissions_to_the_next_beat() -> None:
    """With a 60 s beat, capacity freed at t=100 is handed out at the beat of t=120."""
    outcome = replay_jobs(
        TWO_TENANTS, pool(BORROWING), QUEUEING_POLICIES["gpupool"].sim, cycle_s=60
    )
    assert by_name(outcome)["b-1"] == (160, 110, 0, 0)


def test_event_cycles_equal_a_periodic_beat_on_the_grid() -> None:
    """When every event falls on the 60 s grid, a periodic cycle changes nothing."""
    jobs = [
        job("a-1", 4, 0, 6000),
        job("a-2", 4, 0, 9000),
        job("b-1", 4, 600, 3000),
        job("b-2", 2, 1200, 600),
    ]
    for name in ("kueue-like", "gpupool"):
        plain = replay_jobs(jobs, pool(BORROWING), QUEUEING_POLICIES[name].sim)
        ticked = replay_jobs(jobs, pool(BORROWING), QUEUEING_POLICIES[name].sim, tick_s=60)
        assert by_name(plain) == by_name(ticked)
        assert ticked.cycles > plain.cycles


def test_every_job_finishes_and_gpus_never_exceed_the_pool() -> None:
    """Held GPUs never exceed the pool at any instant."""
    jobs = [job(f"{q}-{i}", 1 + i % 4, i * 37.0, 500 + 91 * i) for q in "ab" for i in range(12)]
    outcome = replay_jobs(jobs, pool(BORROWING), QUEUEING_POLICIES["kueue-like"].sim)
    assert all(r.finished_at is not None for r in outcome.records)
    changes = sorted(
        [(s.start, s.gpus) for s in outcome.segments] + [(s.end, -s.gpus) for s in outcome.segments]
    )
    held = 0.0
    for _, delta in changes:
        held += delta
        assert held <= 8


@pytest.mark.parametrize(
    ("victim_search", "evicted", "lost_s"),
    [("fewest", "a-1", 200), ("greedy", "a-2", 1000)],
    ids=["fewest", "greedy"],
)
def test_reclaim_evicts_the_job_that_checkpointed_last_and_loses_least(
    victim_search: VictimSearch, evicted: str, lost_s: float
) -> None:
    """At t=2,000 a-1 checkpointed at 1,800 (200 s at stake) and a-2, started at 1,000, never
    did (1,000 s): the replay reports checkpoints, so the product's search evicts a-1; the
    kueue-like baseline's (Kueue's greedy search, which knows no checkpoints) evicts the
    most recently started, a-2."""
    jobs = [job("a-1", 4, 0, 10_000), job("a-2", 4, 1000, 10_000), job("b-1", 4, 2000, 100)]
    sim = QUEUEING_POLICIES["kueue-like"].sim
    sim = replace(sim, policy=replace(sim.policy, victim_search=victim_search))
    outcome = replay_jobs(jobs, pool({"a": (2, 8), "b": (6, 8)}), sim)
    lost = {
        name: (evictions, lost_s) for name, (_, _, evictions, lost_s) in by_name(outcome).items()
    }
    want: dict[str, tuple[int, object]] = {"a-1": (0, 0), "a-2": (0, 0), "b-1": (0, 0)}
    want[evicted] = (1, pytest.approx(lost_s))
    assert lost == want


def test_a_running_job_reports_its_last_checkpoint_of_this_run() -> None:
    """None before the first 30 minutes of a run, then the latest 30-minute mark."""
    jobs = [job("a-1", 4, 0, 10_000)]
    state = JobReplay(jobs, pool({"a": (8, 8)}), QUEUEING_POLICIES["kueue-like"].sim)
    record = state.records["a-1"]
    record.segment_start = 100.0
    assert [state.last_checkpoint(record, t) for t in (100, 1899, 1900, 5000)] == [
        None,
        None,
        1900,
        3700,
    ]


def test_finish_time_fairness_is_jct_shared_over_alone_per_tenant() -> None:
    """b's 8-GPU job holds the node (protected); a's, a second later, finishes at 200 instead
    of 101: rho(a) = 199 / 100, rho(b) = 1, the worst 1.99."""
    shared = pool({"a": (4, 8), "b": (4, 8)})
    sim = QUEUEING_POLICIES["gpupool"].sim
    outcome = replay_jobs([job("b-1", 8, 0, 100), job("a-1", 8, 1, 100)], shared, sim)
    alone = {
        tenant: replay_jobs([job(f"{tenant}-1", 8, 0, 100)], pool({tenant: (8, 8)}), sim)
        for tenant in ("a", "b")
    }
    metrics = summarise(outcome, shared, 200.0, {"a": 4, "b": 4}, alone)
    assert metrics.tenants["a"].finish_time_fairness == pytest.approx(1.99)
    assert metrics.tenants["b"].finish_time_fairness == pytest.approx(1.0)
    assert metrics.finish_time_fairness_max == pytest.approx(1.99)
    entry = metrics.to_json()
    assert entry["finish_time_fairness_max"] == 1.99
    assert entry["tenants"]["a"]["alone_jct_mean_s"] == 100.0
    without = summarise(outcome, shared, 200.0, {"a": 4, "b": 4})
    assert without.finish_time_fairness_max is None


@pytest.mark.parametrize(
    ("demand", "weight", "split"),
    [
        # enough for everyone: each gets its demand
        ({"a": 2, "b": 3}, {"a": 1, "b": 1}, {"a": 2, "b": 3}),
        # equal weights, both want it all: half each
        ({"a": 8, "b": 8}, {"a": 1, "b": 1}, {"a": 4, "b": 4}),
        # weights 3:1, both want it all: 6 and 2
        ({"a": 8, "b": 8}, {"a": 3, "b": 1}, {"a": 6, "b": 2}),
        # b wants less than its half: the rest goes to a (water-filling)
        ({"a": 8, "b": 1}, {"a": 1, "b": 1}, {"a": 7, "b": 1}),
        # three tenants, c satisfied first, a and b split the rest 1:1
        ({"a": 8, "b": 8, "c": 2}, {"a": 1, "b": 1, "c": 1}, {"a": 3, "b": 3, "c": 2}),
    ],
)
def test_fair_split_is_weighted_max_min(
    demand: dict[str, float], weight: dict[str, float], split: dict[str, float]
) -> None:
    """On 8 GPUs."""
    assert fair_split(demand, weight, 8) == pytest.approx(split)


def test_share_deviation_of_a_hand_checked_replay() -> None:
    """b's 8-GPU job holds the node for [0, 100); a's arrives at 1 and runs [100, 200).

    Fair split (deserved 4 and 4): b alone wants it at [0, 1) -> 8 to b; both want 8 over
    [1, 100) -> 4 and 4, while b holds 8: 4 GPUs off; a alone over [100, 200). Over a 200 s
    window: 99 x 4 / (8 x 200) = 0.2475 of the pool; b +1.98 GPUs on average, a -1.98.
    """
    shared = pool({"a": (4, 8), "b": (4, 8)})
    outcome = replay_jobs(
        [job("b-1", 8, 0, 100), job("a-1", 8, 1, 100)], shared, QUEUEING_POLICIES["gpupool"].sim
    )
    deviation = share_deviation(outcome, shared, 200.0)
    assert deviation.pool == pytest.approx(0.2475)
    assert deviation.gap_gpus == pytest.approx({"a": -1.98, "b": 1.98})
    metrics = summarise(outcome, shared, 200.0, {"a": 4, "b": 4})
    assert metrics.to_json()["share_deviation"] == 0.2475
    assert metrics.to_json()["tenants"]["a"]["share_gap_gpus"] == -1.98
