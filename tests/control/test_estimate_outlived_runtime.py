"""Running work that outlived its expected runtime is not taken to end now.

The demo's report: a workload waiting behind running work whose learned runtime had passed was
estimated to start "now" at every refresh -- the replay finished such work at once. The loop
(and the estimates' own read) now gives such work the median runtime of the similar finished
runs that outlasted it so far, or no runtime when none did (``RuntimeHistory.expected_runtime``);
backfill's "ends before the holder could start" reads the same end.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from loop_builders import World, build_world

from gpupool.control.estimates import EstimateRefresher
from gpupool.control.learning import RuntimeHistory
from gpupool.scheduler import plan
from gpupool.scheduler.lifecycle import due
from gpupool.scheduler.scenario import scenario_from_dict
from gpupool.scheduler.types import Snapshot, WorkloadInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scheduler"))
from scheduler_builders import pool, queue, scenario, workload

pytestmark = pytest.mark.django_db

MINUTE = 60
HISTORY = (10, 20, 30, 40, 60)  # minutes: the median is 30


@pytest.fixture
def world(db: None) -> World:
    """One node of 8 GPUs, a loop."""
    return build_world(nodes=1)


def finish_runs(world: World, minutes: tuple[int, ...]) -> None:
    """8-GPU workloads of team-a that ran ``minutes`` each and succeeded: the history."""
    for index, length in enumerate(minutes):
        name = f"past-{index}"
        start_running(world, name)
        world.cluster.tick(length * MINUTE)
        for pod in world.cluster.pods_of(name):
            world.cluster.finish(pod.key)
        world.cycle()
        assert world.workload(name).state == "succeeded"


def start_running(world: World, name: str, **fields: object) -> datetime:
    """An 8-GPU workload admitted, bound and running; when it started."""
    world.submit(name, gpus=8, **fields)
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    started = world.workload(name).started_at
    assert world.workload(name).state == "running" and started is not None
    return started


def estimate_after(world: World, minutes: int) -> tuple[datetime | None, datetime]:
    """Move the pool's clock, run a cycle and refresh: next's estimate, and the cycle's now."""
    world.cluster.tick(minutes * MINUTE)
    world.cycle()
    world.loop.refresh_estimates()
    assert world.loop.latest is not None
    now = datetime.fromtimestamp(world.loop.latest.now, tz=UTC)
    return world.workload("next").estimated_start_at, now


def test_work_waiting_on_work_that_outlived_its_learned_runtime_is_not_estimated_now(
    world: World,
) -> None:
    """The reporter's case: two successive re-estimates after the learned end passed."""
    finish_runs(world, HISTORY)
    started = start_running(world, "hog")  # declares nothing: learned, 30 minutes
    world.submit("next", gpus=8, expected_runtime_s=3600)
    first, first_now = estimate_after(world, 35)  # past its learned end
    second, second_now = estimate_after(world, 20)  # 55 minutes in: past that end too
    assert first is not None and first > first_now
    assert second is not None and second > second_now
    # the median of the runs that lasted longer than it has run so far: 40 and 60 minutes,
    # then 60 alone
    assert abs((first - started) - timedelta(minutes=50)) < timedelta(seconds=2)
    assert abs((second - started) - timedelta(minutes=60)) < timedelta(seconds=2)
    assert world.workload("next").pending_facts["estimate_learned"] is True


def test_no_similar_run_lasted_that_long_gives_no_estimate(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    finish_runs(world, HISTORY)
    start_running(world, "hog")
    world.submit("next", gpus=8, expected_runtime_s=3600)
    at, now = estimate_after(world, 65)  # longer than every similar run
    assert at is None
    assert world.loop.latest is not None
    (hog,) = [w for w in world.loop.latest.snapshot.workloads if w.name == "team-a/hog"]
    assert hog.expected_runtime_s is None  # its end is unknown, not "now"
    # and a process that ran no cycle reads the same (the estimates' own snapshot), at the
    # pool's time (the fake cluster's clock runs ahead of the wall's)
    monkeypatch.setattr("django.utils.timezone.now", lambda: now)
    run = EstimateRefresher(world.loop.policy).refresh(None)
    assert run.source == "state" and run.estimated == 0
    assert world.workload("next").estimated_start_at is None


def test_a_declared_runtime_that_passed_falls_back_to_the_history(world: World) -> None:
    finish_runs(world, HISTORY)
    started = start_running(world, "hog", expected_runtime_s=20 * MINUTE)
    world.submit("next", gpus=8, expected_runtime_s=3600)
    at, now = estimate_after(world, 35)  # its declared 20 minutes passed
    assert at is not None and at > now
    assert abs((at - started) - timedelta(minutes=50)) < timedelta(seconds=2)
    assert world.workload("next").pending_facts["estimate_learned"] is True


def test_a_declared_runtime_that_passed_with_no_history_gives_no_estimate(world: World) -> None:
    start_running(world, "hog", expected_runtime_s=20 * MINUTE)
    world.submit("next", gpus=8, expected_runtime_s=3600)
    at, _ = estimate_after(world, 35)
    assert at is None


def test_the_conditional_median_is_of_the_similar_runs_that_outlasted_it() -> None:
    loaded = scenario_from_dict(
        scenario(pool(1), [queue("team-a", deserved=8)], [workload("r1", gpus=1, on=[("n1", [0])])])
    )
    (r1,) = loaded.snapshot.workloads
    history = RuntimeHistory()
    history.add((r1, minutes * MINUTE) for minutes in HISTORY)
    assert history.outlasting(r1, 5 * MINUTE) == 30 * MINUTE  # all five
    assert history.outlasting(r1, 30 * MINUTE) == 50 * MINUTE  # 40 and 60: longer than 30
    assert history.outlasting(r1, 45 * MINUTE) == 60 * MINUTE
    assert history.outlasting(r1, 60 * MINUTE) is None  # none lasted longer
    history.add((r1, minutes * MINUTE) for minutes in (70, 90))
    assert history.outlasting(r1, 60 * MINUTE) == 80 * MINUTE
    # what the snapshot gives a running r1 (started 08:00) at 09:00 by its learned 40 minutes
    expected = history.expected_runtime(r1, r1.started_at + 60 * MINUTE)  # type: ignore[operator]
    assert expected.runtime_s == 80 * MINUTE and expected.learned and expected.outlived
    assert expected.until == r1.started_at + 70 * MINUTE  # type: ignore[operator]


def test_backfill_sees_the_same_end_for_work_that_outlived_its_learned_runtime() -> None:
    """A starving 8-GPU gang holds n1 behind r1 (4 GPUs, running since 09:00, now 10:00);
    r1 declares nothing and similar work took 30 minutes, or 150 once past an hour. A
    protected hour-long job backfills the hold only if it ends before r1 is expected to:
    taken to end "now", r1 left it no time; by the runs that outlasted it, until 11:30."""
    r1 = workload("r1", gpus=4, on=[("n1", [0, 1, 2, 3])], started="09:00")
    b_run = workload("b-run", "team-b", on=[("n2", list(range(8)))], started="09:30")
    b_run["protected_runtime_s"] = 86400
    b_run["expected_runtime_s"] = 86400
    short = workload("short", "team-b", gpus=4, submitted="09:30", protected_s=3600)
    short["expected_runtime_s"] = 3600
    loaded = scenario_from_dict(
        scenario(
            pool(2),
            [queue("team-a", deserved=16), queue("team-b", deserved=8, capability=16)],
            [r1, b_run, workload("starving", submitted="06:00"), short],
            policy={"placement": "gpupool", "starvation_limit_s": 3600},
        )
    )
    info = next(w for w in loaded.snapshot.workloads if w.name == "r1")
    history = RuntimeHistory()
    history.add((info, minutes * MINUTE) for minutes in (20, 30, 30, 150))

    def with_r1_runtime(seconds: float | None) -> Snapshot:
        workloads = tuple(
            replace(w, expected_runtime_s=seconds) if w.name == "r1" else w
            for w in loaded.snapshot.workloads
        )
        return replace(loaded.snapshot, workloads=workloads)

    # the plain median: r1 is "due now", the hold opens now, nothing is in time before it
    median = history.median(info)
    assert median == 30 * MINUTE
    assert plan(with_r1_runtime(median), loaded.policy, loaded.now).admit == ()
    # the rule the snapshot applies: r1 is expected to run 150 minutes, until 11:30
    expected = history.expected_runtime(info, loaded.now)
    assert expected.runtime_s == 150 * MINUTE and expected.learned
    snapshot = with_r1_runtime(expected.runtime_s)
    assert due(snapshot, loaded.now) == ()
    result = plan(snapshot, loaded.policy, loaded.now)
    assert [a.workload for a in result.admit] == ["short"]
    assert result.admit[0].backfill_for is None  # in time, not as evictable work


def test_work_past_its_declared_end_keeps_its_snapshot_info_while_its_runtime_holds(
    db: None,
) -> None:
    """Running work past its declared end gets the conditional median in the snapshot: a
    new info made once, kept while the answer's runtime stays the same -- also when the
    history moved meanwhile (a run finished: B1-loop's every cycle), which made thousands of
    them anew every cycle."""
    world = build_world(nodes=2)
    finish_runs(world, HISTORY)
    start_running(world, "hog", expected_runtime_s=20 * MINUTE)
    world.cluster.tick(35 * MINUTE)  # its declared 20 minutes passed: runs of 40 and 60 outlast it
    world.cycle()

    def hog() -> WorkloadInfo:
        assert world.loop.latest is not None
        (info,) = [w for w in world.loop.latest.snapshot.workloads if w.name == "team-a/hog"]
        return info

    before = hog()
    assert before.expected_runtime_s is not None
    assert abs(before.expected_runtime_s - 50 * MINUTE) < 2  # the median of 40 and 60
    version = world.loop.runtimes.version
    start_running(world, "short")  # a short similar run: the history moves, the answer not
    world.cluster.tick(MINUTE)
    for pod in world.cluster.pods_of("short"):
        world.cluster.finish(pod.key)
    world.cycle()
    assert world.loop.runtimes.version != version
    world.cycle()
    assert hog() is before
