"""The contract's ``suspend_job``, on both backends (``cluster_worlds.EVERY_BACKEND``).

A cancelled workload whose pods a batch/v1 Job controls is removed by suspending the Job
(``spec.suspend``): its controller deletes the Job's active pods and makes none again, where
gpupool deleting them had the controller make them again, each counted a failed try, until
the Job ended ``BackoffLimitExceeded``. On the local plane the Job controller of
kube-controller-manager does it; the simulated cluster plays it (its Jobs are the pods that
name one their controller).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from cluster_worlds import (
    EVERY_BACKEND,
    KubernetesWorld,
    SimulatedWorld,
    World,
    open_world,
    pod_manifest,
)

from gpupool.clusters.base import ClusterView, JobKey, PodBinding, PodFacts


@pytest.fixture(params=EVERY_BACKEND)
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """The contract's backends."""
    yield from open_world(request)


def pods_of(view: ClusterView, job: JobKey) -> list[PodFacts]:
    return [p for p in view.pods.values() if p.job == job]


def running_job(world: World, name: str) -> tuple[JobKey, PodFacts]:
    """A Job of one 1-GPU pod for gpupool (no retries: ``backoffLimit: 0``), its pod bound
    and running. The plane's Job controller makes the pod; the simulated cluster's is added
    naming the Job its controller, as the controller names itself."""
    job = world.job(name, backoff_limit=0)
    if job is None:
        assert isinstance(world, SimulatedWorld)
        job = JobKey(world.namespace, name)
        manifest = pod_manifest(
            world.namespace, f"{name}-{secrets.token_hex(3)}", 1,
            labels={"gpupool.io/workload": name},
        )  # fmt: skip
        manifest["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": "job-uid",
             "controller": True, "blockOwnerDeletion": True}
        ]  # fmt: skip
        world.cluster.add_pod(manifest)
    node = world.node(gpus=8)
    view = world.until("the Job's pod", lambda v: bool(pods_of(v, job)) and node in v.nodes)
    (pod,) = pods_of(view, job)
    assert world.backend.bind([PodBinding(pod.ref, node)]).ok
    view = world.until("the Job's pod running", lambda v: pods_of(v, job)[0].phase == "Running")
    return job, pods_of(view, job)[0]


def suspended_and_settled(world: World, job: JobKey) -> bool:
    """Whether the Job is suspended and its controller has acted on it: the plane's Job says
    ``Suspended`` with no active pod (after that it makes none); the simulated cluster's
    controller acts at once."""
    if not isinstance(world, KubernetesWorld):
        return True
    from kubernetes import client

    answer: Any = client.BatchV1Api(world.core.api_client).read_namespaced_job(
        job.name, job.namespace
    )
    conditions = answer.status.conditions or []
    said = any(c.type == "Suspended" and c.status == "True" for c in conditions)
    return bool(answer.spec.suspend) and said and not answer.status.active


def test_a_suspended_jobs_pods_are_deleted_by_its_controller_and_not_made_again(
    world: World,
) -> None:
    job, pod = running_job(world, f"cancel-{secrets.token_hex(2)}")

    result = world.backend.suspend_job(job)

    assert (result.job, result.status) == (job, "suspended")
    view = world.until("the Job's pods gone", lambda v: not pods_of(v, job))
    assert pod.key not in view.pods
    world.eventually(
        "the Job suspended, its controller done", lambda: suspended_and_settled(world, job)
    )
    view = world.backend.sync()
    assert not pods_of(view, job)  # not made again
    if view.jobs:  # the plane: the Job is not failed, and counted no failed try
        facts = view.jobs[job]
        assert (facts.state, facts.failed) == ("active", 0), facts
    else:  # the simulated cluster: the Job's controller makes no pod while it is suspended
        assert isinstance(world, SimulatedWorld)
        again = pod_manifest(world.namespace, f"{job.name}-again", 1)
        again["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": job.name, "uid": "job-uid",
             "controller": True}
        ]  # fmt: skip
        with pytest.raises(ValueError, match="suspended"):
            world.cluster.add_pod(again)
    # Idempotent: suspending it again is still "suspended".
    assert world.backend.suspend_job(job).status == "suspended"


def test_suspending_a_job_that_does_not_exist_says_gone(world: World) -> None:
    job = JobKey(world.namespace, f"no-such-job-{secrets.token_hex(2)}")

    result = world.backend.suspend_job(job)

    assert (result.job, result.status) == (job, "gone")
