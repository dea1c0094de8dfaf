"""A cordon or drain in gpupool cordons the node in the cluster too (``spec.unschedulable``,
through ``ClusterBackend.set_node_unschedulable``), so other schedulers place nothing there;
uncordoning lifts gpupool's own cordon, never one made with kubectl. A drained node whose
only pods left are other schedulers' is drained (gpupool never evicts those), and says what
they hold. On the simulated cluster (in memory, virtual clock): two 8-GPU nodes."""

from __future__ import annotations

from typing import Any

import pytest
from domain_builders import flavor, priority_class, queue, quota, tenant

from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.control.loop import ControlLoop
from gpupool.inventory.actions import do_drain_node, do_set_node_cordoned
from gpupool.inventory.choices import NodeState
from gpupool.inventory.models import Node

CORDONED_BY_GPUPOOL = "gpupool.io/cordoned"  # the annotation on gpupool's own cordon

pytestmark = pytest.mark.django_db

START = 1_800_000_000.0
PRODUCT = "NVIDIA-H100-80GB-HBM3"


class Pool:
    """The simulated cluster and a loop on it."""

    def __init__(self) -> None:
        h100 = flavor("h100", node_labels={"nvidia.com/gpu.product": PRODUCT})
        priority_class("normal", 0, default=True)
        team = queue("team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",)))
        quota(team, h100, 0, 8, 16)
        self.cluster = SimulatedCluster(MemoryStore(), VirtualClock(START))
        group = {"kind": "hgx", "prefix": "u", "gpus": 8, "product": PRODUCT}
        self.cluster.add_nodes([gpu_node_manifest(f"u-{n}", group) for n in (1, 2)])
        self.loop = ControlLoop(SimulatedBackend(self.cluster))

    def cycle(self) -> None:
        result = self.loop.run_cycle()
        assert result.status == "succeeded", result.error

    def spec_and_annotations(self, name: str) -> tuple[dict[str, Any], dict[str, str]]:
        """The node's spec and annotations as the cluster holds them (``kubectl get``)."""
        with self.cluster.store.transaction() as tx:
            body = tx.get("Node", "", name).body
        return dict(body.get("spec") or {}), dict(
            (body.get("metadata") or {}).get("annotations") or {}
        )


@pytest.fixture
def pool(db: None) -> Pool:
    return Pool()


def test_a_drain_cordons_the_node_in_the_cluster_and_uncordoning_lifts_it(pool: Pool) -> None:
    pool.cycle()
    do_drain_node(Node.objects.get(name="u-1"), acting_user=None, reason="maintenance")
    pool.cycle()
    spec, annotations = pool.spec_and_annotations("u-1")
    assert spec.get("unschedulable") is True and CORDONED_BY_GPUPOOL in annotations
    pool.cycle()
    assert Node.objects.get(name="u-1").state == NodeState.DRAINED
    do_set_node_cordoned(Node.objects.get(name="u-1"), cordoned=False, acting_user=None)
    pool.cycle()
    spec, annotations = pool.spec_and_annotations("u-1")
    assert "unschedulable" not in spec and CORDONED_BY_GPUPOOL not in annotations
    pool.cycle()
    assert Node.objects.get(name="u-1").state == NodeState.READY


def test_a_plain_cordon_is_pushed_and_a_kubectl_cordon_is_never_lifted(pool: Pool) -> None:
    pool.cycle()
    do_set_node_cordoned(Node.objects.get(name="u-1"), cordoned=True, acting_user=None)
    pool.cluster.cordon("u-2")  # kubectl cordon: not gpupool's
    pool.cycle()
    assert pool.spec_and_annotations("u-1")[0].get("unschedulable") is True
    do_set_node_cordoned(Node.objects.get(name="u-2"), cordoned=True, acting_user=None)
    pool.cycle()
    do_set_node_cordoned(Node.objects.get(name="u-2"), cordoned=False, acting_user=None)
    pool.cycle()
    pool.cycle()
    spec, annotations = pool.spec_and_annotations("u-2")
    assert spec.get("unschedulable") is True and CORDONED_BY_GPUPOOL not in annotations
    assert Node.objects.get(name="u-2").state == NodeState.EXCLUDED  # the cluster's cordon


def test_a_drained_node_with_only_another_schedulers_pod_left_is_drained(pool: Pool) -> None:
    resources = {"nvidia.com/gpu": "2", "cpu": "1", "memory": "1Gi"}
    pool.cluster.add_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "other"},
            "spec": {
                "schedulerName": "default-scheduler",
                "nodeName": "u-1",
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.invalid/web:1",
                        "resources": {"requests": resources, "limits": resources},
                    }
                ],
            },
        }
    )
    pool.cycle()
    do_drain_node(Node.objects.get(name="u-1"), acting_user=None, reason="maintenance")
    pool.cycle()
    pool.cycle()
    node = Node.objects.get(name="u-1")
    assert node.state == NodeState.DRAINED
    assert node.foreign_gpus == 2
    assert "2 GPUs held by other schedulers' pods" in node.health_reasons()
