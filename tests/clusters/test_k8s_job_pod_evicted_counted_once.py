"""On the local plane: a Job's pod evicted with the Eviction API is one preemption (the
tester's issue 1). While the Job controller waits out its back-off before the next pod, the
workload waits as a gang for it (reason ``gang``); before, each cycle of that wait admitted
it with no pod to bind and the next read it as "its pods were removed outside gpupool": a
preemption a cycle (three for one eviction)."""

from __future__ import annotations

import pytest
from kubernetes import client
from test_control_loop_k8s import Plane, gpu_job, plane  # noqa: F401 (the fixture)

from gpupool.accounting.models import PreemptionEvent

pytestmark = [pytest.mark.k8s, pytest.mark.django_db(transaction=True)]


def test_a_jobs_pod_evicted_is_one_preemption_and_its_next_pod_runs(
    plane: Plane,  # noqa: F811
) -> None:
    namespace = plane.namespaces["team-a"]
    batch = client.BatchV1Api(plane.api)
    batch.create_namespaced_job(namespace, gpu_job("job-c", backoff_limit=4))
    plane.until("the Job's pod running", lambda: plane.state("job-c") == "running")
    job_c = plane.workload("job-c")
    (pod,) = [
        p for p in plane.pods(selector="gpupool.io/workload=job-c") if p["spec"].get("nodeName")
    ]
    name = pod["metadata"]["name"]
    plane.core.create_namespaced_pod_eviction(
        name, namespace, {"metadata": {"name": name}}, _preload_content=False
    )
    plane.until("the workload requeued", lambda: plane.state("job-c") == "pending")
    plane.until(
        "the Job's next pod running as the same workload",
        lambda: (
            plane.state("job-c") == "running"
            and any(
                p["metadata"]["name"] != name
                for p in plane.pods(selector="gpupool.io/workload=job-c")
            )
        ),
    )
    assert plane.workload("job-c").pk == job_c.pk
    (event,) = PreemptionEvent.objects.filter(victim=job_c)
    assert event.reason == "admin"
    states = [t.to_state for t in job_c.transitions.order_by("id")]
    # admitted again only once the Job's next pod exists: never with nothing to bind
    assert states == [
        "pending",
        "admitted",
        "running",
        "preempted",
        "pending",
        "admitted",
        "running",
    ]
    batch.delete_namespaced_job("job-c", namespace, propagation_policy="Background")
