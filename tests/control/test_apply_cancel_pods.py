"""Apply's part of a cancel (``apply.cancel_pods``, ``run_apply``): a Job's pods are removed
by suspending the Job; a Job that cannot be suspended (gone, or the API refused) has its pods
deleted as before, so their GPUs come back; a bare pod is deleted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpupool.clusters.base import (
    JobKey,
    JobSuspendResult,
    PodFacts,
    PodRef,
    PodResult,
    PodsOutcome,
)
from gpupool.control.apply import ApplyWork, cancel_pods, run_apply


class Recording:
    """The acting half of a backend, remembering what it was asked."""

    def __init__(self, answers: dict[JobKey, str]) -> None:
        self.answers = answers
        self.deleted: list[PodRef] = []
        self.suspended: list[JobKey] = []
        self.events: list[Any] = []

    def suspend_job(self, job: JobKey) -> JobSuspendResult:
        self.suspended.append(job)
        return JobSuspendResult(job, self.answers[job], "why")  # type: ignore[arg-type]

    def delete_pods(self, pods: Sequence[PodRef], reason: str) -> PodsOutcome:
        self.deleted.extend(pods)
        return PodsOutcome(tuple(PodResult(p, "deleted") for p in pods))

    def record_events(self, events: Sequence[Any]) -> list[str]:
        self.events.extend(events)
        return ["created"] * len(events)

    def evict(self, pods: Any, reason: str) -> Any:
        raise AssertionError("nothing to evict")

    def create_pods(self, pods: Any) -> Any:
        raise AssertionError("nothing to create")

    def bind_many(self, gangs: Any) -> dict[str, Any]:
        return {}


def test_a_job_that_cannot_be_suspended_has_its_pods_deleted_as_before() -> None:
    """Gone (deleted meanwhile) or refused (no ``patch`` on jobs): the pods are deleted, so
    their GPUs come back; suspended: none is."""

    def job_pod(name: str, job: str, node: str | None = "g-1") -> PodFacts:
        return PodFacts("team-a", name, f"uid-{name}", node_name=node, phase="Running",
                        owner_kind="Job", owner_name=job)  # fmt: skip

    pods = [job_pod("a-0", "a"), job_pod("a-1", "a"), job_pod("b-0", "b"), job_pod("c-0", "c")]
    work = ApplyWork()
    cancel_pods(work, [*pods, PodFacts("team-a", "bare", "uid-bare")])
    backend = Recording(
        {
            JobKey("team-a", "a"): "suspended",
            JobKey("team-a", "b"): "gone",
            JobKey("team-a", "c"): "failed",
        }
    )

    outcome = run_apply(backend, work)  # type: ignore[arg-type]

    assert sorted(backend.suspended) == [JobKey("team-a", n) for n in "abc"]
    assert sorted(p.name for p in backend.deleted) == ["b-0", "bare", "c-0"]
    assert outcome.counts["suspended"] == 1
    assert sorted(e.pod.name for e in backend.events) == ["a-0", "a-1", "b-0", "c-0"]
