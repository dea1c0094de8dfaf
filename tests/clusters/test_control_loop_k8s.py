"""The control loop against the local kube-apiserver with KWOK nodes (issue 14's loop tests).

Each test gets its own namespace (owned by a tenant), its own KWOK nodes with a GPU product
label no other test uses (so the loop's inventory is just them) and a loop on the Kubernetes
backend; it runs cycles until the cluster and the database show what it expects, with a
deadline and no bare sleeps. The Celery test starts real workers on the test database and
Redis. These tests live beside the plane's fixtures (``tests/clusters/conftest.py``), which
start one plane per session.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import pytest
from django.db import connection
from kubernetes import client

from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.audit.models import AuditEvent
from gpupool.clusters.kubernetes import KubernetesBackend
from gpupool.control.loop import ControlLoop, CycleResult
from gpupool.control.models import SchedulingCycle
from gpupool.control.runner import run_forever
from gpupool.inventory.actions import do_save_flavor, do_set_gpu_health
from gpupool.inventory.models import Flavor, Gpu
from gpupool.quotas.actions import do_save_priority_class, do_save_queue, do_set_queue_quota
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.tenancy.actions import do_save_tenant
from gpupool.tenancy.models import Tenant
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

pytestmark = [pytest.mark.k8s, pytest.mark.django_db(transaction=True)]

T = TypeVar("T")
TIMEOUT = 90.0
ROOT = Path(__file__).resolve().parents[2]


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = TIMEOUT) -> T:
    """Poll ``probe`` until it is truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            seen = [
                (w.namespace, w.name, w.state, w.pending_reason, w.pending_detail[:120])
                for w in Workload.objects.all()
            ]
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}; workloads: {seen}")
        time.sleep(0.2)


@dataclass
class Plane:
    """The test's corner of the plane: its namespaces, nodes, flavor, queues and loop."""

    api: Any
    namespaces: dict[str, str]  # team -> namespace
    nodes: list[str]
    flavor: Flavor
    queues: dict[str, Queue]
    loop: ControlLoop
    kubeconfig: Path  # the admin's, as a user's kubectl
    scheduler_kubeconfig: Path  # the scheduler's identity (deploy/kubernetes/rbac.yaml)

    @property
    def core(self) -> client.CoreV1Api:
        """The core/v1 API."""
        return client.CoreV1Api(self.api)

    def cycle(self) -> CycleResult:
        """One cycle; it must succeed."""
        result = self.loop.run_cycle()
        assert result.status == "succeeded", result.error
        return result

    def until(self, what: str, probe: Callable[[], T | None], timeout: float = TIMEOUT) -> T:
        """Run cycles until ``probe`` is truthy."""

        def step() -> T | None:
            self.cycle()
            return probe()

        return wait_for(what, step, timeout)

    def submit(
        self, name: str, team: str = "team-a", gpus: int = 1, count: int = 1, **fields: Any
    ) -> Workload:
        """A workload submitted through gpupool in the team's namespace."""
        return do_submit_workload(
            name,
            queue=self.queues[team],
            pod_sets=[PodSetSpec(count, gpus=gpus, flavor=self.flavor)],
            namespace=self.namespaces[team],
            **fields,
        )

    def workload(self, name: str, team: str = "team-a") -> Workload:
        """The workload as the database has it now."""
        return Workload.objects.get(namespace=self.namespaces[team], name=name)

    def state(self, name: str, team: str = "team-a") -> str | None:
        """The workload's state, or None while no cycle has seen its pods yet.

        A Job's pods come from the Job controller, after the Job is made: the first
        cycles may run before there is any workload to read.
        """
        row = Workload.objects.filter(namespace=self.namespaces[team], name=name).first()
        return row.state if row else None

    def pods(self, team: str = "team-a", selector: str = "") -> list[dict[str, Any]]:
        """The team namespace's pods, as JSON."""
        answer = self.core.list_namespaced_pod(
            self.namespaces[team], label_selector=selector, _preload_content=False
        )
        return list(json.loads(answer.data)["items"])

    def bound(self, workload: str, team: str = "team-a") -> list[str]:
        """The nodes of a workload's pods that are bound and running."""
        return [
            p["spec"]["nodeName"]
            for p in self.pods(team, f"gpupool.io/workload={workload}")
            if p["spec"].get("nodeName")
            and p["status"].get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")
        ]

    def running_pod(self, name: str, team: str = "team-a") -> str | None:
        """The node of a pod, once it is bound and running."""
        pod = self.core.read_namespaced_pod(name, self.namespaces[team])
        running = pod.spec.node_name and pod.status.phase == "Running"
        return str(pod.spec.node_name) if running else None

    def create_pod(
        self,
        name: str,
        team: str = "team-a",
        gpus: int = 1,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        **spec: Any,
    ) -> None:
        """A pod created with kubectl for gpupool, in the team's namespace."""
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "labels": {"gpupool.io/queue": team, **(labels or {})},
                "annotations": dict(annotations or {}),
            },
            "spec": {
                "schedulerName": "gpupool",
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {
                            "limits": {"nvidia.com/gpu": str(gpus)},
                            "requests": {"nvidia.com/gpu": str(gpus)},
                        },
                    }
                ],
                **spec,
            },
        }
        self.core.create_namespaced_pod(self.namespaces[team], body)


@pytest.fixture
def plane(
    k8s_api: Any,
    k8s_namespace: str,
    k8s_fake_node: Callable[..., str],
    k8s_plane_info: Any,
    k8s_scheduler_kubeconfig: Path,
) -> Iterator[Plane]:
    """Two teams (each owning a namespace, each deserving 8 GPUs of capability 16) and two
    8-GPU KWOK nodes of a product only this test has."""
    core = client.CoreV1Api(k8s_api)
    other = f"{k8s_namespace[:50]}-b"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=other)))
    product = f"NVIDIA-TEST-{secrets.token_hex(3).upper()}"
    flavor = do_save_flavor(
        Flavor(
            name=f"gpu-{product[-6:].lower()}",
            gpu_memory_gb=80,
            hourly_price=Decimal("2.5"),
            node_labels={"nvidia.com/gpu.product": product},
        ),
        acting_user=None,
    )
    nodes = [k8s_fake_node(gpus=8, product=product) for _ in range(2)]
    for name, value, default in (("low", -100, False), ("normal", 0, True), ("high", 1000, False)):
        if not PriorityClass.objects.filter(name=name).exists():
            do_save_priority_class(
                PriorityClass(name=name, value=value, default=default), acting_user=None
            )
    root = do_save_queue(Queue(name="root"), acting_user=None)
    namespaces = {"team-a": k8s_namespace, "team-b": other}
    queues = {}
    for team, namespace in namespaces.items():
        owner = do_save_tenant(
            Tenant(name=team, organization="org"), namespaces=(namespace,), acting_user=None
        )
        queues[team] = do_save_queue(Queue(name=team, parent=root, tenant=owner), acting_user=None)
        do_set_queue_quota(
            queues[team], flavor, guarantee=0, deserved=8, capability=16, acting_user=None
        )
    backend = KubernetesBackend.connect(str(k8s_scheduler_kubeconfig))
    loop = ControlLoop(backend)
    try:
        yield Plane(
            k8s_api,
            namespaces,
            nodes,
            flavor,
            queues,
            loop,
            Path(k8s_plane_info.kubeconfig),
            k8s_scheduler_kubeconfig,
        )
    finally:
        loop.close()
        core.delete_collection_namespaced_pod(other, grace_period_seconds=0)
        core.delete_namespace(other)


def test_a_gang_is_admitted_end_to_end_every_pod_bound(plane: Plane) -> None:
    plane.submit("gang", gpus=4, count=3)  # three pods of four GPUs: spans both nodes
    plane.until("the gang's three pods running", lambda: len(plane.bound("gang")) == 3)
    plane.until("the workload running", lambda: plane.workload("gang").state == "running")
    gang = plane.workload("gang")
    assert sorted(plane.bound("gang")) == sorted(p.node.name for p in gang.placements.all())
    assert UsageInterval.objects.get(workload=gang).gpus == 12


def test_pods_created_with_kubectl_become_a_workload_and_the_waiting_ones_say_why(
    plane: Plane,
) -> None:
    plane.create_pod("fits", gpus=8)
    for index in range(3):  # 24 GPUs, above the queue's capability of 16 (each pod fits a node)
        plane.create_pod(f"too-big-{index}", gpus=8, labels={"gpupool.io/workload": "too-big"})
    plane.until("the fitting pod running", lambda: plane.running_pod("fits"))
    assert plane.workload("fits").origin == "bare"
    big = plane.workload("too-big")
    assert big.state == "pending" and big.pending_reason == "quota"
    kubectl = Path(os.environ.get("KUBECTL", "")) if os.environ.get("KUBECTL") else None
    command = [
        str(kubectl) if kubectl else "kubectl",
        "--kubeconfig",
        str(plane.kubeconfig),
        "describe",
        "pod",
        "too-big-0",
        "-n",
        plane.namespaces["team-a"],
    ]
    from hack import k8s_plane

    with contextlib.suppress(k8s_plane.PlaneError):
        command[0] = str(k8s_plane.find_assets() / "kubectl")
    described = wait_for(
        "kubectl describe to show the explanation",
        lambda: (
            (out := subprocess.run(command, capture_output=True, text=True, check=True).stdout)
            and big.pending_detail[:40] in out
            and out
        ),
    )
    assert "Waiting" in described and "gpupool" in described


def test_a_kubectl_pod_no_node_could_hold_is_registered_never_planned_and_told_why(
    plane: Plane,
) -> None:
    """The rule of submission (``workloads.actions.pod_sets_errors``) on pods from the cluster:
    registered and left pending with the reason, a Warning Event names it; never planned."""
    plane.create_pod("huge", gpus=16)  # the nodes have 8
    plane.create_pod("fits", gpus=1)
    plane.until("the fitting pod running", lambda: plane.running_pod("fits"))
    huge = plane.until("the large pod explained", lambda: plane.workload("huge").pending_reason)
    why = "pod huge: 16 GPUs per pod, and a pod runs on one node: the largest"
    row = plane.workload("huge")
    assert huge == "capacity" and row.state == "pending" and why in row.pending_detail
    assert row.pending_facts["never_fits"] is True and row.queue_position is None
    assert plane.loop.latest is not None
    assert str(row.qualified_name) not in {w.name for w in plane.loop.latest.snapshot.workloads}
    events = plane.core.list_namespaced_event(
        plane.namespaces["team-a"], field_selector="involvedObject.name=huge"
    ).items
    warned = [e for e in events if e.type == "Warning" and e.reason == "FailedScheduling"]
    assert len(warned) == 1 and why in warned[0].message
    assert not plane.running_pod("huge")


def test_a_kubectl_elastic_gang_grows_onto_its_waiting_pods_when_capacity_frees(
    plane: Plane,
) -> None:
    """An elastic gang made with kubectl (four pods of 2 GPUs, minimum 2) is admitted with
    the two pods the free GPUs hold; its other two pods wait, bound to nothing, until
    another team's pod goes; then the grow phase places them (its queue stays within its
    deserved 8 GPUs) and the loop binds them through ``pods/binding``, the two it ran
    untouched, its usage opened again for all 8 GPUs and the growth audited."""
    plane.create_pod("b-whole", team="team-b", gpus=8)
    plane.create_pod("b-half", team="team-b", gpus=4)
    plane.until(
        "team-b's pods running",
        lambda: plane.running_pod("b-whole", "team-b") and plane.running_pod("b-half", "team-b"),
    )
    for index in range(4):
        plane.create_pod(
            f"elastic-{index}",
            gpus=2,
            labels={"gpupool.io/workload": "elastic"},
            annotations={"gpupool.io/min-member": "2"},
        )
    plane.until("two of the gang's pods running", lambda: len(plane.bound("elastic")) == 2)
    first = sorted(plane.bound("elastic"))
    for _ in range(3):  # no free GPU: it runs on with two
        plane.cycle()
    gang = plane.workload("elastic")
    assert gang.state == "running" and gang.placements.count() == 2
    assert sorted(plane.bound("elastic")) == first
    plane.core.delete_namespaced_pod("b-half", plane.namespaces["team-b"], grace_period_seconds=0)
    plane.until("the gang grown to its four pods", lambda: len(plane.bound("elastic")) == 4)
    gang = plane.workload("elastic")
    assert gang.state == "running" and gang.placements.count() == 4
    assert sorted(p.node.name for p in gang.placements.all()) == sorted(plane.bound("elastic"))
    assert UsageInterval.objects.get(workload=gang, ended_at__isnull=True).gpus == 8
    grown = AuditEvent.objects.filter(action="control.grow_workload", object_id=str(gang.pk))
    assert grown.count() == 1
    assert not PreemptionEvent.objects.filter(victim=gang).exists()


def test_reclaim_evicts_the_pods_the_plan_names_and_the_reclaimer_runs_after(
    plane: Plane,
) -> None:
    for name in ("borrower-1", "borrower-2"):  # team-b takes all 16 GPUs: 8 of them borrowed
        plane.submit(name, team="team-b", gpus=8)
    plane.until(
        "both borrowers running",
        lambda: plane.bound("borrower-1", "team-b") and plane.bound("borrower-2", "team-b"),
    )
    plane.submit("owner", gpus=8)  # team-a wants its deserved 8 back
    plane.until("the owner running", lambda: plane.bound("owner"))
    (event,) = PreemptionEvent.objects.all()
    assert (event.reason, event.preemptor.name) == ("reclaim", "owner")
    victim = event.victim
    victim.refresh_from_db()
    assert victim.state in ("pending", "admitted")  # requeued; gpupool makes its pods again
    assert not plane.bound(victim.name, "team-b")  # the capacity went to the owner
    survivor = ({"borrower-1", "borrower-2"} - {victim.name}).pop()
    assert plane.bound(survivor, "team-b")


def test_a_refused_eviction_leaves_the_victim_running_and_the_preemptor_pending(
    plane: Plane,
) -> None:
    plane.submit("victim", gpus=8, count=2, priority_class=PriorityClass.objects.get(name="low"))
    plane.until("the victim running", lambda: len(plane.bound("victim")) == 2)
    budget = {
        "metadata": {"name": "keep-victim"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"gpupool.io/workload": "victim"}}},
    }
    client.PolicyV1Api(plane.api).create_namespaced_pod_disruption_budget(
        plane.namespaces["team-a"], budget
    )
    wait_for(
        "the budget observed",
        lambda: (
            client.PolicyV1Api(plane.api)
            .read_namespaced_pod_disruption_budget("keep-victim", plane.namespaces["team-a"])
            .status.current_healthy
            == 2
        ),
    )
    plane.submit("urgent", gpus=8, priority_class=PriorityClass.objects.get(name="high"))
    plane.until(
        "the eviction refused by the budget",
        lambda: SchedulingCycle.objects.filter(outcome__counts__evict_errors__gte=1).exists(),
    )
    for _ in range(3):
        plane.cycle()
    assert len(plane.bound("victim")) == 2
    victim, urgent = plane.workload("victim"), plane.workload("urgent")
    assert victim.state == "running" and not victim.eviction_reason
    assert urgent.state == "pending" and not urgent.nominated
    assert not PreemptionEvent.objects.filter(victim=victim).exists()


def test_a_jobs_evicted_pod_is_recreated_and_requeued_as_the_same_workload(plane: Plane) -> None:
    namespace = plane.namespaces["team-a"]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "trainer"},
        "spec": {
            "backoffLimit": 4,
            "template": {
                "metadata": {
                    "labels": {"gpupool.io/queue": "team-a", "gpupool.io/workload": "trainer"}
                },
                "spec": {
                    "schedulerName": "gpupool",
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"limits": {"nvidia.com/gpu": "8"}},
                        }
                    ],
                },
            },
        },
    }
    client.BatchV1Api(plane.api).create_namespaced_job(namespace, job)
    first = plane.until("the Job's pod running", lambda: plane.bound("trainer"))
    trainer = plane.workload("trainer")
    assert trainer.origin == "controller"
    pod = next(
        p for p in plane.pods(selector="gpupool.io/workload=trainer") if p["spec"].get("nodeName")
    )
    client.CoreV1Api(plane.api).create_namespaced_pod_eviction(
        pod["metadata"]["name"],
        namespace,
        {"metadata": {"name": pod["metadata"]["name"]}},
        _preload_content=False,
    )
    plane.until(
        "the recreated pod running as the same workload",
        lambda: (
            plane.bound("trainer")
            and plane.workload("trainer").pk == trainer.pk
            and plane.workload("trainer").transitions.filter(to_state="preempted").exists()
        ),
    )
    assert first  # the first run was bound too
    client.BatchV1Api(plane.api).delete_namespaced_job(
        "trainer", namespace, propagation_policy="Background"
    )


def gpu_job(name: str, backoff_limit: int) -> dict[str, Any]:
    """A Job of one 8-GPU pod for gpupool that runs until the test ends it (KWOK's stock
    pod-complete stage would end a Job's pod within seconds: its delay is set to an hour, and
    its jitter-delay with it, since the stage waits no longer than the jitter, 5 s unless set)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {
                "metadata": {
                    "labels": {"gpupool.io/queue": "team-a", "gpupool.io/workload": name},
                    "annotations": {
                        "pod-complete.stage.kwok.x-k8s.io/delay": "3600s",
                        "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "3600s",
                    },
                },
                "spec": {
                    "schedulerName": "gpupool",
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"limits": {"nvidia.com/gpu": "8"}},
                        }
                    ],
                },
            },
        },
    }


def end_pod(plane: Plane, pod: dict[str, Any], phase: str, exit_code: int) -> None:
    """End a running pod as its kubelet would report it (KWOK runs no containers)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}],
        "containerStatuses": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Error" if exit_code else "Completed",
                        "startedAt": pod["status"].get("startTime", now),
                        "finishedAt": now,
                    }
                },
            }
        ],
    }
    plane.core.patch_namespaced_pod_status(
        pod["metadata"]["name"], pod["metadata"]["namespace"], {"status": status}
    )


def running_job_pod(plane: Plane, name: str) -> dict[str, Any]:
    """The Job's pod that runs now (bound, Running), once its workload runs too."""
    plane.until(
        f"the Job {name}'s pod running",
        lambda: plane.bound(name) and plane.state(name) == "running",
    )
    return next(
        p
        for p in plane.pods(selector=f"gpupool.io/workload={name}")
        if p["spec"].get("nodeName") and p["status"].get("phase") == "Running"
    )


def test_a_jobs_failed_pod_is_retried_and_the_retry_runs_as_the_same_workload(
    plane: Plane,
) -> None:
    namespace = plane.namespaces["team-a"]
    batch = client.BatchV1Api(plane.api)
    batch.create_namespaced_job(namespace, gpu_job("retried", backoff_limit=2))
    first = running_job_pod(plane, "retried")
    retried = plane.workload("retried")
    assert (retried.origin, retried.state) == ("controller", "running")

    end_pod(plane, first, "Failed", 1)
    plane.until("the workload requeued", lambda: plane.state("retried") == "pending")
    requeue = retried.transitions.order_by("id").last()
    assert requeue is not None and requeue.reason == (
        f"pod {first['metadata']['name']} failed; its Job {namespace}/retried retries it"
    )
    assert not plane.workload("retried").placements.exists()
    assert UsageInterval.objects.get(workload=retried).ended_at is not None
    assert not PreemptionEvent.objects.filter(victim=retried).exists()

    # The Job controller makes the retry (after its back-off); gpupool binds and runs it.
    second = running_job_pod(plane, "retried")
    assert second["metadata"]["name"] != first["metadata"]["name"]
    assert plane.workload("retried").pk == retried.pk
    assert UsageInterval.objects.filter(workload=retried).count() == 2

    end_pod(plane, second, "Succeeded", 0)
    plane.until("the workload succeeded", lambda: plane.state("retried") == "succeeded")
    states = [t.to_state for t in retried.transitions.order_by("id")]
    assert states == ["pending", "admitted", "running", "pending", "admitted", "running",
                      "succeeded"]  # fmt: skip
    assert retried.transitions.order_by("id").last().reason == (  # type: ignore[union-attr]
        f"its Job {namespace}/retried completed"
    )
    batch.delete_namespaced_job("retried", namespace, propagation_policy="Background")


def test_a_job_without_retries_ends_failed_with_the_jobs_reason(plane: Plane) -> None:
    namespace = plane.namespaces["team-a"]
    batch = client.BatchV1Api(plane.api)
    batch.create_namespaced_job(namespace, gpu_job("once", backoff_limit=0))
    pod = running_job_pod(plane, "once")
    end_pod(plane, pod, "Failed", 1)
    plane.until("the workload failed", lambda: plane.state("once") == "failed")
    once = plane.workload("once")
    reason = once.transitions.order_by("id").last().reason  # type: ignore[union-attr]
    assert reason.startswith(
        f"pod {pod['metadata']['name']} failed; its Job {namespace}/once failed "
        "(BackoffLimitExceeded"
    ), reason
    assert [t.to_state for t in once.transitions.order_by("id")][-2:] == ["running", "failed"]
    assert len(plane.pods(selector="gpupool.io/workload=once")) == 1  # no retry was made
    batch.delete_namespaced_job("once", namespace, propagation_policy="Background")


def test_an_unhealthy_gpu_or_a_not_ready_node_takes_no_new_placements(plane: Plane) -> None:
    plane.cycle()
    first, second = plane.nodes
    for gpu in Gpu.objects.filter(node__name=first):
        do_set_gpu_health(gpu, healthy=False, reason="XID 79", acting_user=None)
    node = client.CoreV1Api(plane.api).read_node(second)
    node.metadata.annotations["kwok.x-k8s.io/node"] = "released"
    client.CoreV1Api(plane.api).patch_node(
        second, {"metadata": {"annotations": node.metadata.annotations}}
    )
    client.CoreV1Api(plane.api).patch_node_status(
        second,
        {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "Test",
                        "message": "made NotReady",
                    }
                ]
            }
        },
    )
    plane.until("the node excluded", lambda: plane.loop.state.nodes[second].cordoned)
    plane.submit("waits", gpus=1)
    for _ in range(3):
        plane.cycle()
    waits = plane.workload("waits")
    assert waits.state == "pending" and waits.pending_reason == "capacity"


def test_the_loop_survives_an_api_server_restart(
    plane: Plane, k8s_restart_apiserver: Callable[[], None]
) -> None:
    plane.submit("before", gpus=1)
    plane.until("the first workload running", lambda: plane.bound("before"))
    k8s_restart_apiserver()
    plane.submit("after", gpus=1)
    plane.until("a workload submitted after the restart running", lambda: plane.bound("after"))


def test_a_crash_between_record_and_apply_leaves_no_double_binding(
    plane: Plane, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpupool.control import loop as loop_module

    plane.submit("gang", gpus=4, count=2)
    plane.until("the gang's pods created", lambda: len(plane.pods()) == 2)

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the worker died between record and apply")

    monkeypatch.setattr(loop_module, "run_apply", crash)
    assert plane.loop.run_cycle().status == "failed"
    assert plane.workload("gang").state == "admitted"
    assert not plane.bound("gang")
    monkeypatch.undo()
    plane.until("the gang bound", lambda: len(plane.bound("gang")) == 2)
    gang = plane.workload("gang")
    assert sorted(plane.bound("gang")) == sorted(p.node.name for p in gang.placements.all())
    assert gang.placements.count() == 2


def _worker(env: dict[str, str], name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "gpupool",
            "worker",
            "-P",
            "solo",
            "-n",
            f"{name}@%h",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-Q",
            env["GPUPOOL_TEST_QUEUE"],
            "--loglevel",
            "WARNING",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL") or not os.environ.get("DATABASE_URL"),
    reason="the workers need Redis (REDIS_URL) and a database they share (DATABASE_URL)",
)
def test_two_celery_workers_run_one_cycle_at_a_time(plane: Plane) -> None:
    from gpupool.celery import app
    from gpupool.control.tasks import run_cycle_task

    settings = connection.settings_dict
    database = (
        f"postgres://{settings['USER']}:{settings['PASSWORD']}@{settings['HOST']}:"
        f"{settings['PORT']}/{settings['NAME']}"
        if connection.vendor == "postgresql"
        else f"sqlite:///{settings['NAME']}"
    )
    queue = f"gpupool-test-{secrets.token_hex(4)}"
    env = {
        **os.environ,
        "DATABASE_URL": database,
        "GPUPOOL_CLUSTER": "kubernetes",
        "GPUPOOL_KUBECONFIG": str(plane.scheduler_kubeconfig),
        "GPUPOOL_TEST_QUEUE": queue,
    }
    plane.submit("by-celery", gpus=2)
    workers = [_worker(env, f"w{i}-{queue}") for i in range(2)]
    try:
        wait_for("two workers", lambda: len(app.control.inspect(timeout=1).ping() or {}) >= 2)
        started = SchedulingCycle.objects.count()
        deadline = time.monotonic() + 120
        sent = 0
        while plane.workload("by-celery").state != "running" or sent < 12:
            # Cycle tasks expire after the loop's interval; on a loaded machine some would
            # expire in the queue and never make the cycle row this test counts.
            run_cycle_task.apply_async(queue=queue, expires=600)
            sent += 1
            if time.monotonic() > deadline:
                pytest.fail("the workload did not run through the Celery workers")
            time.sleep(0.3)
        wait_for(
            "every cycle sent handled",
            lambda: SchedulingCycle.objects.count() - started >= sent,
            timeout=120,
        )
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(30)
    cycles = list(
        SchedulingCycle.objects.filter(status="succeeded", finished_at__isnull=False)
        .order_by("started_at")
        .values_list("started_at", "finished_at")
    )
    for (_, end), (start, _) in itertools.pairwise(cycles):
        assert start >= end - timedelta(milliseconds=5), "two cycles overlapped"
    assert plane.bound("by-celery")


def test_a_protected_window_holds_across_cycles_and_then_expires(plane: Plane) -> None:
    plane.submit("filler", team="team-b", gpus=8, protected_runtime_s=3600)
    plane.submit(
        "victim",
        gpus=8,
        protected_runtime_s=15,
        priority_class=PriorityClass.objects.get(name="low"),
    )
    plane.until("both running", lambda: plane.bound("filler", "team-b") and plane.bound("victim"))
    started = plane.workload("victim").admitted_at
    plane.submit("urgent", gpus=8, priority_class=PriorityClass.objects.get(name="high"))
    cycles_inside = 0
    while plane.workload("victim").admitted_at and time.time() < started.timestamp() + 12:
        plane.cycle()
        cycles_inside += 1
        assert not plane.workload("victim").eviction_reason, "evicted inside its window"
    assert cycles_inside >= 2
    plane.until("the urgent work running once the window ended", lambda: plane.bound("urgent"))
    event = PreemptionEvent.objects.get(victim=plane.workload("victim"))
    assert event.at.timestamp() >= started.timestamp() + 15


def test_usage_intervals_and_gpu_hours_add_up_against_a_hand_count(plane: Plane) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "short"},
        "spec": {
            "template": {
                "metadata": {
                    "labels": {"gpupool.io/queue": "team-a", "gpupool.io/workload": "short"},
                    "annotations": {  # both: the jitter (5 s unless set) caps the delay
                        "pod-complete.stage.kwok.x-k8s.io/delay": "6s",
                        "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "6s",
                    },
                },
                "spec": {
                    "schedulerName": "gpupool",
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"limits": {"nvidia.com/gpu": "2"}},
                        }
                    ],
                },
            },
        },
    }
    client.BatchV1Api(plane.api).create_namespaced_job(plane.namespaces["team-a"], job)
    plane.until("the Job's workload succeeded", lambda: plane.state("short") == "succeeded")
    short = plane.workload("short")
    (usage,) = UsageInterval.objects.filter(workload=short)
    assert usage.started_at == short.admitted_at and usage.ended_at == short.finished_at
    assert (usage.queue.name, usage.tenant.name, usage.gpus) == ("team-a", "team-a", 2)
    seconds = (short.finished_at - short.admitted_at).total_seconds()
    assert usage.gpu_hours(short.finished_at) == Decimal(2) * Decimal(seconds) / 3600
    assert 3 <= seconds <= 30  # KWOK ends the pod six seconds after it was created
    assert usage.cost(short.finished_at) == usage.gpu_hours(short.finished_at) * Decimal("2.5")


def test_a_budget_runs_out_mid_run_and_the_work_is_demoted_not_killed(plane: Plane) -> None:
    from django.utils import timezone

    from gpupool.quotas.actions import do_grant_budget
    from gpupool.quotas.models import PriorityBudget

    urgent = do_save_priority_class(
        PriorityClass(name="urgent", value=2000, budget_rate=Decimal(1)), acting_user=None
    )
    today = timezone.localdate()
    do_grant_budget(
        Tenant.objects.get(name="team-a"),
        urgent,
        period_start=today - timedelta(days=1),
        period_end=today + timedelta(days=1),
        gpu_hours=Decimal("0.005"),
        acting_user=None,
    )  # 18 GPU-seconds: two GPUs exhaust it in nine seconds
    plane.submit("paid", gpus=2, protected_runtime_s=0, priority_class=urgent)
    plane.until("the paid work running", lambda: plane.bound("paid"))
    budget = PriorityBudget.objects.get()
    plane.until("the budget spent", lambda: budget.remaining_gpu_hours() <= 0, timeout=60)
    for _ in range(3):
        plane.cycle()
    assert budget.remaining_gpu_hours() == 0  # spent what was granted, never more
    paid = plane.workload("paid")
    assert paid.state == "running" and not paid.eviction_reason
    assert plane.bound("paid")


def test_a_pod_made_with_kubectl_starts_a_cycle_before_the_interval_is_over(
    plane: Plane,
) -> None:
    plane.cycle()  # the inventory in
    stop = threading.Event()
    results: list[CycleResult] = []

    def on_cycle(result: CycleResult) -> None:
        results.append(result)

    def run() -> None:
        try:
            run_forever(
                plane.loop, stop, interval_s=600.0, roll_up_interval_s=3600.0,
                on_cycle=on_cycle, on_change=True,
            )  # fmt: skip
        finally:
            connection.close()  # this thread's own connection

    thread = threading.Thread(target=run, name="loop-on-change")
    thread.start()
    try:
        wait_for("the loop's first cycle", lambda: len(results) >= 1)
        # Cycles the first one's own writes started run out; then the loop waits.
        wait_for("a quiet loop", lambda: _quiet(results, 3.0))
        before = len(results)
        plane.create_pod("kubectl-made")
        node = wait_for(
            "the pod bound, long before the 600 s interval",
            lambda: plane.running_pod("kubectl-made"),
            timeout=60.0,
        )
        assert node in plane.nodes
        wait_for("the binding cycle's end", lambda: len(results) > before, timeout=30.0)
        assert all(r.status == "succeeded" for r in results), [r.error for r in results]
    finally:
        stop.set()
        thread.join(60.0)
    assert not thread.is_alive()


def _quiet(results: list[CycleResult], seconds: float) -> bool:
    """Whether no cycle has run for ``seconds``."""
    count = len(results)
    time.sleep(seconds)
    return len(results) == count


def _pipelined(plane: Plane, what: str, probe: Callable[[], T | None]) -> T:
    """Run pipelined cycles (bindings in flight while the next cycle plans) until ``probe``."""

    def step() -> T | None:
        result = plane.loop.run_cycle(pipeline=True)
        assert result.status == "succeeded", result.error
        return probe()

    try:
        return wait_for(what, step)
    finally:
        plane.loop.finish_apply()


def test_pipelined_cycles_bind_a_gang_whole_where_it_was_placed(plane: Plane) -> None:
    plane.submit("gang", gpus=4, count=3)  # spans both nodes
    handed_on: list[int] = []
    original = plane.loop._apply

    def counting(*args: Any, **kwargs: Any) -> Any:
        outcome = original(*args, **kwargs)
        handed_on.append(0 if plane.loop.handed_on is None else 1)
        return outcome

    plane.loop._apply = counting  # type: ignore[method-assign]
    _pipelined(plane, "the gang running", lambda: len(plane.bound("gang")) == 3)
    assert sum(handed_on) >= 1  # its binding went on beside a later cycle
    _pipelined(plane, "the workload running", lambda: plane.workload("gang").state == "running")
    gang = plane.workload("gang")
    assert sorted(plane.bound("gang")) == sorted(p.node.name for p in gang.placements.all())
    assert UsageInterval.objects.get(workload=gang).gpus == 12


def test_a_pipelined_gangs_binding_that_fails_part_way_is_rolled_back_and_requeued(
    plane: Plane,
) -> None:
    plane.submit("gang", gpus=4, count=3)
    backend = plane.loop.backend
    bind_many = backend.bind_many
    raced: list[str] = []

    def racing(gangs: Any) -> Any:
        # At the gang's first binding, the pod of one member is deleted (for real, on the API
        # server) after the cycle planned it and before its binding is sent: it fails (404).
        for key, gang in gangs.items():
            if key.endswith("/gang") and not raced:
                pod = gang[-1].pod
                plane.core.delete_namespaced_pod(pod.name, pod.namespace, grace_period_seconds=0)
                raced.append(pod.name)
        return bind_many(gangs)

    backend.bind_many = racing  # type: ignore[method-assign]
    try:
        _pipelined(
            plane,
            "the failed binding recorded",
            lambda: (
                plane.workload("gang")
                .transitions.filter(reason__startswith="binding failed")
                .exists()
            ),
        )
    finally:
        backend.bind_many = bind_many  # type: ignore[method-assign]
    assert raced
    _pipelined(plane, "the gang bound whole again", lambda: len(plane.bound("gang")) == 3)
    gang = plane.workload("gang")
    assert gang.state in ("admitted", "running")
    assert sorted(plane.bound("gang")) == sorted(p.node.name for p in gang.placements.all())
