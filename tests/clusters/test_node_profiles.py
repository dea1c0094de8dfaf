"""Node profiles expand into the Node objects both clusters carry (the plane's and ours)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.clusters.api_objects import node_facts
from gpupool.clusters.inventory import FlavorSelector, node_inventory
from gpupool.clusters.node_profiles import ProfileError, load_profile, node_manifests, node_runs
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.clusters.simulated_store import MemoryStore

PROFILE = {
    "nodeGroups": [
        {"kind": "hgx", "prefix": "h100", "count": 12, "gpus": 8,
         "product": "NVIDIA-H100-80GB-HBM3", "zone": "zone-b"},
        {"kind": "rack", "prefix": "gb200", "racks": 2, "nodesPerRack": 3, "gpus": 4,
         "product": "NVIDIA-GB200"},
        {"kind": "shared", "prefix": "l40s", "count": 1, "gpus": 4, "replicas": 4,
         "product": "NVIDIA-L40S"},
        {"kind": "mig", "prefix": "a100", "count": 1, "gpus": 8,
         "product": "NVIDIA-A100-SXM4-80GB", "migModel": "A100-80GB",
         "migConfig": "all-3g.40gb", "migLayout": {"3g.40gb": 2}},
    ]
}  # fmt: skip


def test_nodes_are_numbered_as_kwokctl_numbers_them() -> None:
    names = [m["metadata"]["name"] for m in node_manifests(PROFILE)]
    assert names[:2] == ["h100-00", "h100-01"] and names[11] == "h100-11"
    assert names[12:18] == [f"gb200-r{r}-{n}" for r in (0, 1) for n in range(3)]
    assert names[18:] == ["l40s-0", "a100-0"]
    assert [run.name for run in node_runs(PROFILE)] == [
        "h100",
        "gb200-r0",
        "gb200-r1",
        "l40s",
        "a100",
    ]


def test_a_rack_is_one_nvlink_domain_and_an_hgx_node_its_own() -> None:
    facts = {m["metadata"]["name"]: node_facts(m) for m in node_manifests(PROFILE)}
    racks = {facts[f"gb200-r{r}-{n}"].nvlink_domain for r in (0, 1) for n in range(3)}
    assert len(racks) == 2
    assert facts["h100-03"].nvlink_domain == "h100-03"
    assert facts["h100-03"].zone == "zone-b"


def test_shared_and_mig_nodes_offer_what_the_device_plugin_offers() -> None:
    facts = {m["metadata"]["name"]: node_facts(m) for m in node_manifests(PROFILE)}
    shared, mig = facts["l40s-0"], facts["a100-0"]
    assert shared.labels["nvidia.com/gpu.product"] == "NVIDIA-L40S-SHARED"
    assert shared.allocatable.gpus == 16
    assert mig.allocatable.gpus == 0 and dict(mig.allocatable.mig) == {"3g.40gb": 16}
    assert mig.labels["nvidia.com/mig.config"] == "all-3g.40gb"

    flavors = [
        FlavorSelector("l40s-shared", {"nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"}, "shared"),
        FlavorSelector("a100-3g", {"nvidia.com/mig.config": "all-3g.40gb"}, "mig", "3g.40gb"),
    ]
    assert node_inventory(shared, flavors).gpus == 4
    inventory = node_inventory(mig, flavors)
    assert (inventory.gpus, inventory.physical_gpus, dict(inventory.mig_layout)) == (
        16,
        8,
        {"3g.40gb": 2},
    )


@pytest.mark.parametrize(
    ("group", "error"),
    [
        ({"kind": "blade", "prefix": "x", "count": 1, "gpus": 1, "product": "p"}, "unknown kind"),
        ({"kind": "mig", "prefix": "x", "count": 1, "gpus": 1, "product": "p",
          "migModel": "A100-80GB", "migConfig": "c", "migLayout": {"3g.40gb": 3}}, "MIG layout"),
    ],
    ids=["an unknown kind", "a MIG layout the card cannot hold"],
)  # fmt: skip
def test_a_profile_that_cannot_be_expanded_says_why(group: dict[str, object], error: str) -> None:
    with pytest.raises(ProfileError, match=error):
        node_manifests({"nodeGroups": [group]})


def test_two_groups_with_one_prefix_are_refused() -> None:
    group = {"kind": "hgx", "prefix": "h100", "count": 1, "gpus": 8, "product": "p"}
    with pytest.raises(ProfileError, match="duplicate"):
        node_manifests({"nodeGroups": [group, group]})


def test_the_simulated_cluster_holds_the_nodes_the_local_plane_creates() -> None:
    path = Path(__file__).resolve().parents[2] / "hack/k8s-testenv/profiles/default.yaml"
    manifests = node_manifests(load_profile(path))
    cluster = SimulatedCluster(MemoryStore(), VirtualClock(0.0))
    cluster.add_nodes(manifests)
    view = SimulatedBackend(cluster).sync()

    plane = {m["metadata"]["name"]: node_facts(m) for m in manifests}
    assert set(view.nodes) == set(plane)
    for name, facts in view.nodes.items():
        assert (facts.labels, facts.capacity, facts.allocatable) == (
            plane[name].labels,
            plane[name].capacity,
            plane[name].allocatable,
        )
        assert facts.ready and not plane[name].ready  # KWOK makes the plane's Ready later
