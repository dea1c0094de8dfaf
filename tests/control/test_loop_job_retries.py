"""A Job that retries a failed pod gets its retry run (issue 14): the sync's decisions through
the loop, on the fake cluster (which plays the Job controller's part in the Job's facts).

A workload whose pods come from a batch/v1 Job and all ended, one failed, is requeued as
itself while its Job is active (the Job makes the retry pod under the same workload label);
it ends with the Job's verdict once there is one. Bare pods, pods submitted through gpupool
and pods of a Job the cache does not know keep the old rule: a failed pod ends the workload.
"""

from __future__ import annotations

import pytest
from fake_cluster import FakeCluster
from loop_builders import World, build_world

from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.clusters.base import JobFacts, JobKey, PodFacts
from gpupool.control.loop import ControlLoop
from gpupool.control.sync import job_outcome
from gpupool.workloads.models import Workload

JOB = "trainer-owner"  # FakeCluster.add_pod names a pod's owner <workload>-owner


def running_job(world: World, pod: str = "trainer-a") -> Workload:
    """A Job with one 8-GPU pod, bound and running."""
    world.cluster.set_job(JOB, active=1)
    world.cluster.add_pod(pod, workload="trainer", gpus=8, owner="Job")
    world.cycle()
    world.cluster.run()
    world.cycle()
    trainer = world.workload("trainer")
    assert (trainer.origin, trainer.state) == ("controller", "running")
    return trainer


def fail(world: World, pod: str, **job: object) -> None:
    """The pod fails, and the Job controller reports what ``job`` says."""
    world.cluster.finish(next(k for k in world.cluster.pods if k.name == pod), "Failed")
    world.cluster.set_job(JOB, **job)


def states(workload: Workload) -> list[str]:
    return [t.to_state for t in workload.transitions.order_by("id")]


def last_reason(workload: Workload) -> str:
    return str(workload.transitions.order_by("id").last().reason)  # type: ignore[union-attr]


pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """Two teams, one 8-GPU node, a loop."""
    return build_world(nodes=1)


def test_a_jobs_failed_pod_is_requeued_and_its_retry_runs_as_the_same_workload(
    world: World,
) -> None:
    trainer = running_job(world)
    fail(world, "trainer-a", active=0, failed=1)
    world.cycle()
    after = world.workload("trainer")
    assert after.state == "pending"
    assert last_reason(after) == "pod trainer-a failed; its Job team-a/trainer-owner retries it"
    assert not after.placements.exists()
    (usage,) = UsageInterval.objects.filter(workload=trainer)
    assert usage.ended_at is not None  # its GPUs and usage released
    assert not PreemptionEvent.objects.exists()  # a pod failure is not a preemption
    assert "preempted" not in states(after)

    world.cycle()  # no retry pod yet: it waits, out of the plan (nothing to bind)
    waiting = world.workload("trainer")
    assert (waiting.state, waiting.pending_reason) == ("pending", "gang")
    assert not waiting.placements.exists()

    retry = world.cluster.add_pod("trainer-b", workload="trainer", gpus=8, owner="Job")
    world.cluster.set_job(JOB, active=1)
    world.cycle()
    world.cycle()
    assert world.cluster.pods[retry].node_name == "n1"
    world.cluster.run()
    world.cycle()
    again = world.workload("trainer")
    assert (again.pk, again.state) == (trainer.pk, "running")
    assert UsageInterval.objects.filter(workload=trainer, ended_at__isnull=True).count() == 1

    world.cluster.finish(retry, "Succeeded")
    world.cluster.set_job(JOB, active=0, succeeded=1, state="complete", reason="CompletionsReached")
    world.cycle()
    done = world.workload("trainer")
    assert done.state == "succeeded"
    assert last_reason(done) == "its Job team-a/trainer-owner completed"
    assert states(done) == [
        "pending",
        "admitted",
        "running",
        "pending",
        "admitted",
        "running",
        "succeeded",
    ]
    assert not UsageInterval.objects.filter(workload=trainer, ended_at__isnull=True).exists()


def test_a_retry_that_fails_too_is_retried_again_and_the_reason_names_the_latest_pod(
    world: World,
) -> None:
    running_job(world)
    fail(world, "trainer-a", active=0, failed=1)
    world.cycle()
    world.cluster.tick(10)  # the Job controller's back-off before the retry
    world.cluster.add_pod("trainer-b", workload="trainer", gpus=8, owner="Job")
    world.cluster.set_job(JOB, active=1)
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    assert world.workload("trainer").state == "running"
    fail(world, "trainer-b", active=0, failed=2)
    world.cycle()
    trainer = world.workload("trainer")
    assert trainer.state == "pending"
    assert last_reason(trainer) == (
        "pod trainer-b failed (and 1 more); its Job team-a/trainer-owner retries it"
    )
    assert UsageInterval.objects.filter(workload=trainer, ended_at__isnull=True).count() == 0
    assert UsageInterval.objects.filter(workload=trainer).count() == 2


def test_a_failed_pod_the_job_has_not_counted_yet_waits_for_the_jobs_word(world: World) -> None:
    """The pod's end reaches the sync before the Job controller counts it: no decision yet.
    The Job's status change alone (no pod changes) brings the workload back to the sync."""
    running_job(world)
    fail(world, "trainer-a")  # the Job still says one active, none failed
    world.cycle()
    assert world.workload("trainer").state == "running"
    world.cluster.set_job(JOB, active=0, failed=1)
    world.cycle()
    assert world.workload("trainer").state == "pending"


def test_a_job_that_gives_up_fails_its_workload_with_the_jobs_reason(world: World) -> None:
    running_job(world)
    fail(
        world,
        "trainer-a",
        active=0,
        failed=1,
        state="failed",
        reason="BackoffLimitExceeded",
        message="Job has reached the specified backoff limit",
    )
    world.cycle()
    trainer = world.workload("trainer")
    assert trainer.state == "failed"
    assert last_reason(trainer) == (
        "pod trainer-a failed; its Job team-a/trainer-owner failed "
        "(BackoffLimitExceeded: Job has reached the specified backoff limit)"
    )
    assert states(trainer)[-2:] == ["running", "failed"]


def test_a_requeued_workload_whose_job_then_gives_up_fails_from_pending(world: World) -> None:
    running_job(world)
    fail(world, "trainer-a", active=0, failed=1)
    world.cycle()
    assert world.workload("trainer").state == "pending"
    world.cluster.set_job(JOB, state="failed", reason="BackoffLimitExceeded")
    world.cycle()
    trainer = world.workload("trainer")
    assert trainer.state == "failed"
    assert last_reason(trainer) == "its Job team-a/trainer-owner failed (BackoffLimitExceeded)"
    assert trainer.finished_at is not None


def test_a_requeued_workload_whose_job_then_completes_is_cancelled_not_succeeded(
    world: World,
) -> None:
    """Pending work cannot succeed (the state machine): a Job that completes while its
    workload waits leaves nothing to run, and the transition says whose word it was."""
    running_job(world)
    world.cluster.finish(next(k for k in world.cluster.pods if k.name == "trainer-a"))
    world.cluster.set_job(JOB, active=0, succeeded=1)
    world.cycle()
    assert world.workload("trainer").state == "pending"
    world.cluster.set_job(JOB, state="complete", reason="CompletionsReached")
    world.cycle()
    trainer = world.workload("trainer")
    assert trainer.state == "cancelled"
    assert last_reason(trainer) == "its Job team-a/trainer-owner completed"


def test_a_requeued_workload_whose_job_is_deleted_is_cancelled(world: World) -> None:
    running_job(world)
    fail(world, "trainer-a", active=0, failed=1)
    world.cycle()
    world.cluster.delete_job(JOB)
    world.cycle()
    trainer = world.workload("trainer")
    assert trainer.state == "cancelled"
    assert last_reason(trainer) == "its Job team-a/trainer-owner was deleted"


def test_a_requeued_workload_whose_job_and_pods_are_deleted_is_cancelled(world: World) -> None:
    running_job(world)
    fail(world, "trainer-a", active=0, failed=1)
    world.cycle()
    world.cluster.delete_job(JOB)
    world.cluster.remove(next(k for k in world.cluster.pods if k.name == "trainer-a"))
    world.cycle()
    assert world.workload("trainer").state == "cancelled"


def test_a_loop_restarted_while_a_requeued_workload_waits_for_its_jobs_next_pod_keeps_it(
    world: World,
) -> None:
    """The failed pod is gone (the Job controller's pod clean-up, or an eviction deleted it)
    and the loop restarts before the Job makes the next pod: the new loop's mirror has no pod
    of the workload, but the Job's template names it, so it keeps waiting -- not cancelled as
    work whose pods were deleted."""
    world.cluster.set_job(JOB, workload="trainer")  # the template's gpupool.io/workload label
    trainer = running_job(world)
    fail(world, "trainer-a", active=0, failed=1)
    world.cycle()
    assert world.workload("trainer").state == "pending"
    world.cluster.remove(next(k for k in world.cluster.pods if k.name == "trainer-a"))

    cluster = FakeCluster(nodes=dict(world.cluster.nodes), jobs=dict(world.cluster.jobs))
    restarted = ControlLoop(cluster)
    assert restarted.run_cycle().status == "succeeded"
    waiting = world.workload("trainer")
    assert (waiting.state, waiting.pending_reason) == ("pending", "gang")

    retry = cluster.add_pod("trainer-b", workload="trainer", gpus=8, owner="Job")
    cluster.set_job(JOB, active=1)
    for _ in range(2):
        assert restarted.run_cycle().status == "succeeded"
    assert cluster.pods[retry].node_name == "n1"
    cluster.run()
    assert restarted.run_cycle().status == "succeeded"
    assert (world.workload("trainer").pk, world.workload("trainer").state) == (
        trainer.pk,
        "running",
    )


def test_a_failed_pod_of_a_job_the_cache_does_not_know_fails_its_workload(world: World) -> None:
    """No Job facts (deleted, or a controller that is not a Job): the pods decide, as ever."""
    world.cluster.add_pod("other-a", workload="other", gpus=8, owner="Job")
    world.cycle()
    world.cluster.run()
    world.cycle()
    world.cluster.finish(next(k for k in world.cluster.pods if k.name == "other-a"), "Failed")
    world.cycle()
    other = world.workload("other")
    assert other.state == "failed"
    assert last_reason(other) == "pod other-a failed"


def test_a_failed_bare_pod_and_a_failed_submitted_pod_still_fail_their_workloads(
    world: World,
) -> None:
    bare = world.cluster.add_pod("solo", gpus=1)
    world.submit("mine", gpus=1)
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    world.cluster.finish(bare, "Failed")
    (submitted,) = world.cluster.pods_of("mine")
    world.cluster.finish(submitted.key, "Failed")
    world.cycle()
    assert world.workload("solo").state == "failed"
    assert world.workload("mine").state == "failed"


def test_a_job_with_more_completions_requeues_its_workload_after_a_success(world: World) -> None:
    """The same rule without a failure: a Job still active after its pod succeeded (more
    completions to run) makes the next pod, so the workload waits for it."""
    running_job(world)
    world.cluster.finish(next(k for k in world.cluster.pods if k.name == "trainer-a"))
    world.cluster.set_job(JOB, active=0, succeeded=1)
    world.cycle()
    trainer = world.workload("trainer")
    assert trainer.state == "pending"
    assert last_reason(trainer) == "its pods succeeded; its Job team-a/trainer-owner runs more"


# -- the rule itself, without a database -----------------------------------------------------


def _pod(name: str, phase: str, job: str = "j") -> PodFacts:
    return PodFacts("ns", name, f"uid-{name}", phase=phase, owner_kind="Job", owner_name=job)


@pytest.mark.parametrize(
    ("facts", "phases", "expected"),
    [
        (JobFacts("ns", "j", failed=1), ("Failed",), "more"),
        (JobFacts("ns", "j", failed=0, active=1), ("Failed",), "wait"),
        (JobFacts("ns", "j", failed=1), ("Failed", "Succeeded"), "wait"),
        (JobFacts("ns", "j", failed=1, succeeded=1), ("Failed", "Succeeded"), "more"),
        (JobFacts("ns", "j", state="failed"), ("Failed",), "failed"),
        (JobFacts("ns", "j", state="complete"), ("Failed", "Succeeded"), "complete"),
    ],
)
def test_job_outcome_waits_until_the_job_has_counted_what_the_cache_shows(
    facts: JobFacts, phases: tuple[str, ...], expected: str
) -> None:
    pods = [_pod(f"p{i}", phase) for i, phase in enumerate(phases)]
    outcome = job_outcome({JobKey("ns", "j"): facts}, pods)
    assert (outcome.state if isinstance(outcome, JobFacts) else outcome) == expected


def test_one_failed_job_of_several_fails_the_workload() -> None:
    jobs = {
        JobKey("ns", "a"): JobFacts("ns", "a", state="complete"),
        JobKey("ns", "b"): JobFacts("ns", "b", state="failed", reason="DeadlineExceeded"),
    }
    outcome = job_outcome(jobs, [_pod("x", "Succeeded", "a"), _pod("y", "Failed", "b")])
    assert isinstance(outcome, JobFacts) and outcome.name == "b"
