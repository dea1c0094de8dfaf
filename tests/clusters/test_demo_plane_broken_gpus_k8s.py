"""On the local plane, ``hack.k8s_plane.mark_unhealthy_gpus`` (what ``make demo-k8s`` runs on
the demo's broken GPUs) leaves a node as the loop's sync reads a broken GPU: one GPU less in
allocatable, kept by KWOK, and the label naming which, so the inventory counts it unhealthy
and the sync knows it is GPU 3."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from gpupool.clusters.api_objects import node_facts
from gpupool.clusters.inventory import FlavorSelector, named_unhealthy_gpus, node_inventory
from hack.k8s_plane import mark_unhealthy_gpus

pytestmark = pytest.mark.k8s

H100 = FlavorSelector("h100", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})


def test_a_gpu_broken_on_the_plane_is_the_one_the_label_names(
    k8s_api: Any, k8s_fake_node: Callable[..., str]
) -> None:
    from kubernetes import client

    core = client.CoreV1Api(k8s_api)
    name = k8s_fake_node(gpus=8)
    assert mark_unhealthy_gpus(core, {name: [3], "no-such-node": [1]}) == [name]
    time.sleep(3)  # KWOK's node stages run meanwhile; the status it keeps is the patched one
    facts = node_facts(k8s_api.sanitize_for_serialization(core.read_node(name)))
    assert named_unhealthy_gpus(facts.labels) == (3,)
    inventory = node_inventory(facts, [H100])
    assert (inventory.flavor, inventory.gpus, inventory.unhealthy_gpus) == ("h100", 8, 1)
