"""The control loop on the simulated cluster (in memory, on a virtual clock) with a small
policy: team ``a`` (namespace ``team-a``) deserving 8 H100 GPUs, capable of 16; one default
class ``normal``; node ``u-1`` of 8 GPUs, labelled as GPU feature discovery labels it."""

from __future__ import annotations

import time
from typing import Any

from domain_builders import flavor, priority_class, queue, quota, tenant

from gpupool.clusters.node_profiles import gpu_node_manifest
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore
from gpupool.control.loop import ControlLoop, CycleResult
from gpupool.inventory.models import Flavor
from gpupool.quotas.models import Queue
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

# The virtual clock starts on a whole hour some 40 days after the wall clock, ahead of it as
# a simulated cluster runs (a workload gpupool stamps submitted on the wall clock starts after
# that on the cluster's); a fixed moment fell behind the wall clock once that day had passed.
START = float((int(time.time()) // 3600 + 40 * 24) * 3600)
PRODUCT = "NVIDIA-H100-80GB-HBM3"


class LoopWorld:
    """The simulated cluster, the loop on it, and the rows tests use."""

    def __init__(self, nodes: int = 1) -> None:
        self.h100: Flavor = flavor("h100", node_labels={"nvidia.com/gpu.product": PRODUCT})
        priority_class("normal", 0, default=True)
        root = queue("root")
        self.queue: Queue = queue("team-a", parent=root, tenant=tenant("a", namespaces=("team-a",)))
        quota(self.queue, self.h100, 0, 8, 16)
        self.clock = VirtualClock(START)
        self.cluster = SimulatedCluster(MemoryStore(), self.clock)
        group = {"kind": "hgx", "prefix": "u", "gpus": 8, "product": PRODUCT}
        self.cluster.add_nodes(
            [gpu_node_manifest(f"u-{number}", group) for number in range(1, nodes + 1)]
        )
        self.loop = ControlLoop(SimulatedBackend(self.cluster))

    def cycle(self, **options: Any) -> CycleResult:
        """One cycle; fails the test when it does not succeed."""
        result = self.loop.run_cycle(**options)
        assert result.status in ("succeeded", "dry-run"), result.error
        return result

    def submit(self, name: str, gpus: int = 1, count: int = 1, **fields: Any) -> Workload:
        """A workload submitted through gpupool (its pods are the loop's to create)."""
        return do_submit_workload(
            name,
            queue=self.queue,
            pod_sets=[PodSetSpec(count, gpus=gpus, flavor=self.h100)],
            **fields,
        )

    def workload(self, name: str) -> Workload:
        """The workload as the database has it now."""
        return Workload.objects.get(namespace="team-a", name=name)
