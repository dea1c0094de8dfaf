"""The cluster sync marks the GPU that failed, at its own index, once (DESIGN section 4: only
healthy GPUs are allocatable; per-node counts are exact).

The device plugin reports how many GPUs it does not offer (capacity above allocatable), not
which. A GPU already known broken (seed-demo's XID and ECC findings, an admin's, DCGM's) is one
of those, not one more; a health source that knows the index names it in the node label
``gpupool.io/unhealthy-gpus``. On the simulated cluster (in memory, virtual clock): two 8-GPU
H100 nodes.
"""

from __future__ import annotations

import pytest
from domain_builders import flavor, priority_class, queue, quota, tenant

from gpupool.cli.subcommands.seed_demo import _inventory
from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.control.loop import ControlLoop
from gpupool.control.snapshot import CLUSTER_UNHEALTHY
from gpupool.inventory.models import Flavor, Gpu, healthy_capacity

pytestmark = pytest.mark.django_db

START = 1_800_000_000.0
PRODUCT = "NVIDIA-H100-80GB-HBM3"
XID_79 = "XID 79: the GPU has fallen off the bus"
UNHEALTHY_GPUS_LABEL = "gpupool.io/unhealthy-gpus"  # indices joined by "_"


class Pool:
    """The simulated cluster and a loop on it."""

    def __init__(self) -> None:
        self.h100 = flavor("h100", node_labels={"nvidia.com/gpu.product": PRODUCT})
        priority_class("normal", 0, default=True)
        team = queue("team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",)))
        quota(team, self.h100, 0, 8, 16)
        self.cluster = SimulatedCluster(MemoryStore(), VirtualClock(START))
        group = {"kind": "hgx", "prefix": "u", "gpus": 8, "product": PRODUCT}
        self.cluster.add_nodes([gpu_node_manifest(f"u-{n}", group) for n in (1, 2)])
        self.loop = ControlLoop(SimulatedBackend(self.cluster))

    def cycle(self) -> None:
        result = self.loop.run_cycle()
        assert result.status == "succeeded", result.error

    def name_broken_gpus(self, node: str, named: bool = True) -> None:
        """Label the node with the GPUs the cluster knows broken, as a node health checker
        does (``gpupool.io/unhealthy-gpus``); ``named`` False: no label, as on a cluster
        without such a checker, where the device plugin's count is all there is."""
        broken = self.cluster.unhealthy_gpus(node)
        with self.cluster.store.transaction() as tx:
            stored = tx.get("Node", "", node)
            metadata = dict(stored.body["metadata"])
            labels = dict(metadata.get("labels") or {})
            labels.pop(UNHEALTHY_GPUS_LABEL, None)
            if named:
                labels[UNHEALTHY_GPUS_LABEL] = "_".join(str(i) for i in sorted(broken))
            metadata["labels"] = labels
            tx.put(stored.evolve(body={**stored.body, "metadata": metadata}, facts=None))


def unhealthy(node: str) -> dict[int, str]:
    """The node's unhealthy GPUs in gpupool's books, and why."""
    return dict(
        Gpu.objects.filter(node__name=node, healthy=False).values_list("index", "unhealthy_reason")
    )


@pytest.fixture
def pool(db: None) -> Pool:
    return Pool()


def test_a_seeded_broken_gpu_is_counted_once_at_its_own_index(pool: Pool) -> None:
    """seed-demo's way: the GPU fails in the cluster, the seed writes its reason, the loop syncs."""
    pool.cluster.set_gpu_health("u-1", 3, healthy=False, reason=XID_79)
    # seed-demo reads the cluster through a backend of its own, as the loop does.
    assert _inventory({"h100": pool.h100}, SimulatedBackend(pool.cluster)) == 2
    assert unhealthy("u-1") == {3: XID_79}
    pool.cycle()
    pool.cycle()
    assert unhealthy("u-1") == {3: XID_79}
    assert unhealthy("u-2") == {}
    # The cluster offers 15 GPUs; gpupool counts as many healthy.
    assert healthy_capacity(Flavor.objects.get(name="h100")) == 15


def test_a_gpu_failing_later_is_marked_at_the_index_its_health_source_names(
    pool: Pool,
) -> None:
    """``sim gpu-fail u-2 2``: GPU 2 is the one marked, not the node's last GPU."""
    pool.cycle()
    pool.cluster.set_gpu_health("u-2", 2, healthy=False, reason=XID_79)
    pool.name_broken_gpus("u-2")
    pool.cycle()
    assert unhealthy("u-2") == {2: CLUSTER_UNHEALTHY}
    # It heals: the label and the allocatable say so, and GPU 2 is healthy again.
    pool.cluster.set_gpu_health("u-2", 2, healthy=True)
    pool.name_broken_gpus("u-2")
    pool.cycle()
    assert unhealthy("u-2") == {}
    assert healthy_capacity(Flavor.objects.get(name="h100")) == 16


def test_a_guess_made_before_the_health_source_named_the_gpu_moves_to_it(pool: Pool) -> None:
    """Without a name the count is met by the last GPU (bookkeeping); once the GPU is named,
    the mark moves there and the node still counts one GPU not offered."""
    pool.cycle()
    pool.cluster.set_gpu_health("u-1", 4, healthy=False, reason=XID_79)
    pool.name_broken_gpus("u-1", named=False)
    pool.cycle()
    assert unhealthy("u-1") == {7: CLUSTER_UNHEALTHY}
    pool.name_broken_gpus("u-1")
    pool.cycle()
    assert unhealthy("u-1") == {4: CLUSTER_UNHEALTHY}


def test_the_simulated_cluster_names_the_gpu_that_failed_and_the_loop_marks_it(
    pool: Pool,
) -> None:
    """``manage.py gpupool sim gpu-fail NODE 2`` (``SimulatedCluster.set_gpu_health``) labels
    the node as a health checker would, so the loop marks GPU 2, not the highest index; the
    label goes when the GPU heals, and so does the mark."""
    pool.cycle()
    pool.cluster.set_gpu_health("u-1", 2, healthy=False, reason="XID 48")
    pool.cycle()
    assert list(unhealthy("u-1")) == [2]
    pool.cluster.set_gpu_health("u-1", 2, healthy=True)
    pool.cycle()
    assert unhealthy("u-1") == {}
