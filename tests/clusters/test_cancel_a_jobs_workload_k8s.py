"""Cancelling a Job's workload on the local plane, with its Job controller running.

The tester's report: ``gpupool cancel nlp/job-c`` on a Job's workload deleted the pod, the
Job controller made it again, gpupool deleted it again ("has ended (cancelled)"), until the
Job ended Failed with ``BackoffLimitExceeded`` -- the user's Job marked failed after a fight
with its controller. Now the Job is suspended: its controller deletes the pod and makes no
other; the workload ends ``cancelled`` and the Job is not failed.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from test_control_loop_k8s import Plane, gpu_job, plane, running_job_pod, wait_for

from gpupool.workloads.actions import do_cancel_workload

__all__ = ["plane"]  # the fixture, from the loop's tests

pytestmark = [pytest.mark.k8s, pytest.mark.django_db(transaction=True)]


def test_cancelling_a_jobs_workload_suspends_the_job_and_it_does_not_fail(plane: Plane) -> None:
    namespace = plane.namespaces["team-a"]
    batch = client.BatchV1Api(plane.api)
    batch.create_namespaced_job(namespace, gpu_job("job-c", backoff_limit=1))
    first = running_job_pod(plane, "job-c")
    job_c = plane.workload("job-c")
    assert (job_c.origin, job_c.state) == ("controller", "running")

    do_cancel_workload(job_c, acting_user=None, reason="not needed")

    def settled() -> Any:
        plane.cycle()
        job = batch.read_namespaced_job("job-c", namespace)
        suspended = any(
            c.type == "Suspended" and c.status == "True" for c in job.status.conditions or []
        )
        pods = [p for p in plane.pods(selector="gpupool.io/workload=job-c")
                if not p["metadata"].get("deletionTimestamp")]  # fmt: skip
        return job if job.spec.suspend and suspended and not pods else None

    job = wait_for("the Job suspended and its pod gone", settled)
    for _ in range(5):  # the Job controller makes no pod again, and does not fail the Job
        plane.cycle()
    job = batch.read_namespaced_job("job-c", namespace)
    failed = [c for c in job.status.conditions or [] if c.type in ("Failed", "FailureTarget")]
    assert not failed, failed
    assert not job.status.failed
    names = {p["metadata"]["name"] for p in plane.pods(selector="gpupool.io/workload=job-c")}
    assert names <= {first["metadata"]["name"]}  # no pod made again (the first, at most, ending)
    cancelled = plane.workload("job-c")
    assert cancelled.state == "cancelled"
    assert cancelled.transitions.order_by("id").last().reason == "not needed"  # type: ignore[union-attr]
    events = plane.core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={first['metadata']['name']}"
    ).items
    assert any(
        e.reason == "Cancelled" and f"its Job {namespace}/job-c" in e.message for e in events
    )
    batch.delete_namespaced_job("job-c", namespace, propagation_policy="Background")
