"""A small pool for the control loop's tests: the database's policy and a fake cluster.

Two teams (tenants ``a`` and ``b``, owning namespaces ``team-a`` and ``team-b``) under one
root, each deserving 8 H100 GPUs and capable of 16; classes ``low``, ``normal`` (default) and
``high`` (all free); nodes n1 and n2 of 8 GPUs in the cluster, labelled as GPU feature
discovery labels them, which is how the sync finds their flavor.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from domain_builders import flavor, priority_class, queue, quota, tenant
from fake_cluster import FakeCluster

from gpupool.control.loop import ControlLoop, CycleResult
from gpupool.inventory.models import Flavor
from gpupool.quotas.models import Queue
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

PRODUCT = "NVIDIA-H100"


@dataclass
class World:
    """The fake cluster, the loop on it, and the rows tests use."""

    cluster: FakeCluster
    loop: ControlLoop
    h100: Flavor
    queues: dict[str, Queue]

    def cycle(self, **options: Any) -> CycleResult:
        """One cycle; fails the test when it does not succeed."""
        result = self.loop.run_cycle(**options)
        assert result.status in ("succeeded", "dry-run"), result.error
        return result

    def submit(
        self, name: str, queue: str = "team-a", gpus: int = 1, count: int = 1, **fields: Any
    ) -> Workload:
        """A workload submitted through gpupool (its pods are the loop's to create)."""
        return do_submit_workload(
            name,
            queue=self.queues[queue],
            pod_sets=[PodSetSpec(count, gpus=gpus, flavor=self.h100)],
            **fields,
        )

    def workload(self, name: str, namespace: str = "team-a") -> Workload:
        """The workload as the database has it now."""
        return Workload.objects.get(namespace=namespace, name=name)


def build_world(nodes: int = 2) -> World:
    """The pool described in the module's docstring."""
    h100 = flavor("h100", node_labels={"nvidia.com/gpu.product": PRODUCT})
    priority_class("low", -100)
    priority_class("normal", 0, default=True)
    priority_class("high", 1000)
    root = queue("root")
    queues = {}
    for team, owner in (("team-a", "a"), ("team-b", "b")):
        queues[team] = queue(team, parent=root, tenant=tenant(owner, namespaces=(team,)))
        quota(queues[team], h100, 0, 8, 16)
    cluster = FakeCluster()
    for index in range(1, nodes + 1):
        cluster.add_node(f"n{index}", 8, PRODUCT)
    return World(cluster, ControlLoop(cluster), h100, queues)


def gpus_of(workload: Workload) -> Decimal:
    """GPUs the workload's placements hold."""
    return Decimal(sum(len(p.gpu_indices) for p in workload.placements.all()))
