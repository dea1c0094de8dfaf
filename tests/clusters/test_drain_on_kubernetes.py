"""A drain against the local kube-apiserver with KWOK nodes: the Kubernetes node is cordoned
(``spec.unschedulable``, seen with the API as ``kubectl get node`` sees it) and uncordoned
again; an eviction a PodDisruptionBudget refuses leaves the pod running and tells it, once, in
a Warning Event naming the budget, is kept on the workload (``eviction_refusal``) and not asked
again within its back-off; the budget gone, the drain evicts and the record is cleared. The
plane and a loop per test come from ``test_control_loop_k8s`` (its ``plane`` fixture)."""

from __future__ import annotations

from typing import Any

import pytest
import test_control_loop_k8s
from kubernetes import client
from test_control_loop_k8s import Plane, wait_for

from gpupool.inventory.actions import do_drain_node, do_set_node_cordoned
from gpupool.inventory.models import Node

CORDONED_BY_GPUPOOL = "gpupool.io/cordoned"  # the annotation on gpupool's own cordon

pytestmark = [pytest.mark.k8s, pytest.mark.django_db(transaction=True)]


# The loop tests' fixture: two teams, two 8-GPU KWOK nodes of their own, a loop.
plane = test_control_loop_k8s.plane


def kube_node(plane: Plane, name: str) -> Any:
    """The node as the API server has it."""
    return plane.core.read_node(name)


def test_a_drain_cordons_the_kubernetes_node_and_uncordoning_lifts_it(plane: Plane) -> None:
    name = plane.nodes[0]
    plane.until("the node known", lambda: Node.objects.filter(name=name).exists())
    do_drain_node(Node.objects.get(name=name), acting_user=None, reason="maintenance")
    plane.until(
        "the node cordoned in Kubernetes", lambda: kube_node(plane, name).spec.unschedulable
    )
    assert CORDONED_BY_GPUPOOL in (kube_node(plane, name).metadata.annotations or {})
    plane.until("drained", lambda: Node.objects.get(name=name).state == "drained")
    do_set_node_cordoned(Node.objects.get(name=name), cordoned=False, acting_user=None)
    plane.until("the cordon lifted", lambda: not kube_node(plane, name).spec.unschedulable)
    assert CORDONED_BY_GPUPOOL not in (kube_node(plane, name).metadata.annotations or {})
    plane.until("back in service", lambda: Node.objects.get(name=name).state == "ready")


def test_a_drain_eviction_a_budget_refuses_is_told_on_the_pod_once(plane: Plane) -> None:
    namespace = plane.namespaces["team-a"]
    plane.submit("guarded", gpus=8)
    (node,) = plane.until("the workload running", lambda: plane.bound("guarded"))
    policy = client.PolicyV1Api(plane.api)
    budget = {
        "metadata": {"name": "guard"},
        "spec": {
            "minAvailable": 1,
            "selector": {"matchLabels": {"gpupool.io/workload": "guarded"}},
        },
    }
    policy.create_namespaced_pod_disruption_budget(namespace, budget)
    wait_for(
        "the budget observed",
        lambda: (
            policy.read_namespaced_pod_disruption_budget("guard", namespace).status.current_healthy
            == 1
        ),
    )
    (pod,) = plane.pods(selector="gpupool.io/workload=guarded")
    pod_name = pod["metadata"]["name"]

    def refusals() -> list[Any]:
        events = plane.core.list_namespaced_event(
            namespace, field_selector=f"involvedObject.name={pod_name}"
        ).items
        return [e for e in events if e.reason == "EvictionRefused"]

    do_drain_node(Node.objects.get(name=node), acting_user=None, reason="maintenance")
    (event,) = plane.until("the refusal told on the pod", refusals)
    # Kept on the workload while current (its page, API and ``gpupool why`` say it).
    refusal = plane.workload("guarded").eviction_refusal
    assert refusal["budget"] == f"{namespace}/guard" and refusal["reason"] == "admin"
    assert refusal["nodes"] == [node]
    backend, asked = plane.loop.backend, []
    evict = backend.evict

    def counted(pods: Any, reason: str) -> Any:
        asked.extend(p.name for p in pods)
        return evict(pods, reason)

    backend.evict = counted  # type: ignore[method-assign]
    for _ in range(4):  # within the refusal's back-off the drain does not ask again
        plane.cycle()
    (event,) = refusals()
    assert event.type == "Warning" and (event.count or 1) == 1
    assert f"refused by PodDisruptionBudget {namespace}/guard" in event.message
    assert plane.bound("guarded") == [node]
    assert plane.workload("guarded").state == "running"
    assert pod_name not in asked
    # The budget gone and the back-off over, the drain evicts it, and the refusal is cleared.
    policy.delete_namespaced_pod_disruption_budget("guard", namespace)
    plane.loop.refused_until.clear()  # the back-off (60 s) over, without waiting it out
    plane.until("evicted by the drain", lambda: plane.workload("guarded").state != "running")
    assert pod_name in asked
    assert plane.workload("guarded").eviction_refusal is None
    plane.until("drained", lambda: Node.objects.get(name=node).state == "drained")
