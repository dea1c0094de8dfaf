"""Nodes become inventory: the flavor their labels name, GPUs, domain, and why some are out."""

from __future__ import annotations

import pytest
from cluster_builders import node, taint

from gpupool.clusters.inventory import (
    FlavorMatches,
    FlavorSelector,
    identify_flavor,
    node_inventory,
)

H100 = FlavorSelector("h100", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
GB200 = FlavorSelector("gb200", {"nvidia.com/gpu.product": "NVIDIA-GB200"})
L40S_SHARED = FlavorSelector(
    "l40s-shared",
    {
        "nvidia.com/gpu.product": "NVIDIA-L40S-SHARED",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
    },
    sharing="shared",
)
L40S = FlavorSelector("l40s", {"nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"})
A100_MIG = FlavorSelector(
    "a100-3g.40gb", {"nvidia.com/mig.config": "all-3g.40gb"}, sharing="mig", mig_profile="3g.40gb"
)
FLAVORS = [H100, GB200, L40S_SHARED, L40S, A100_MIG]


def test_an_hgx_node_is_its_own_nvlink_domain_with_its_allocatable_gpus() -> None:
    facts = node_inventory(node("h100-0", labels={"topology.kubernetes.io/zone": "z1"}), FLAVORS)
    assert (facts.flavor, facts.gpus, facts.unhealthy_gpus) == ("h100", 8, 0)
    assert (facts.nvlink_domain, facts.zone, facts.schedulable) == ("h100-0", "z1", True)
    assert (facts.cpu_milli, facts.memory_mib) == (128_000, 1024 * 1024)


def test_a_rack_node_is_in_its_clique_domain() -> None:
    clique = "0a1b.1"
    facts = node_inventory(
        node("gb200-r0-n03", gpus=4, product="NVIDIA-GB200",
             labels={"nvidia.com/gpu.clique": clique}),
        FLAVORS,
    )  # fmt: skip
    assert (facts.flavor, facts.gpus, facts.nvlink_domain) == ("gb200", 4, clique)


def test_gpus_not_allocatable_are_the_unhealthy_ones() -> None:
    facts = node_inventory(node("h100-1", gpus=8, healthy_gpus=6), FLAVORS)
    assert (facts.gpus, facts.unhealthy_gpus) == (8, 2)


def test_the_most_specific_flavor_wins() -> None:
    shared = node(
        "l40s-0",
        gpus=16,
        product="NVIDIA-L40S-SHARED",
        labels={"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"},
    )
    facts = node_inventory(shared, FLAVORS)
    assert facts.flavor == "l40s-shared"
    assert (facts.gpus, facts.physical_gpus) == (4, 4)  # 16 replicas of 4 physical GPUs


def test_a_shared_gpu_lost_takes_all_its_replicas() -> None:
    shared = node(
        "l40s-1",
        gpus=16,
        healthy_gpus=12,
        product="NVIDIA-L40S-SHARED",
        labels={"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"},
    )
    facts = node_inventory(shared, FLAVORS)
    assert (facts.gpus, facts.unhealthy_gpus) == (4, 1)


def test_a_mig_node_counts_instances_of_its_profile_and_its_layout() -> None:
    mig = node(
        "a100mig-0",
        gpus=0,
        product="NVIDIA-A100-SXM4-80GB",
        mig={"3g.40gb": 16},
        labels={"nvidia.com/mig.config": "all-3g.40gb", "nvidia.com/gpu.count": "8"},
    )
    facts = node_inventory(mig, FLAVORS)
    assert (facts.flavor, facts.gpus, facts.physical_gpus) == ("a100-3g.40gb", 16, 8)
    assert dict(facts.mig_layout) == {"3g.40gb": 2}


def test_two_flavors_equally_specific_leave_the_node_out_and_say_so() -> None:
    twins = [H100, FlavorSelector("h100-again", dict(H100.node_labels))]
    match = identify_flavor(node("h100-2"), twins)
    assert match.flavor is None
    assert match.error == "the node matches flavors h100, h100-again equally"


def test_a_node_no_flavor_names_is_left_out() -> None:
    facts = node_inventory(node("cpu-0", gpus=0, product=None), FLAVORS)
    assert (facts.flavor, facts.schedulable) == (None, False)
    assert facts.exclusion == "no flavor's node labels match this node"


def test_flavor_matches_remembered_across_nodes_are_identify_flavor_s() -> None:
    twins = [*FLAVORS, FlavorSelector("h100-again", dict(H100.node_labels))]
    nodes = [
        node("h100-4"),
        node("h100-5", labels={"topology.kubernetes.io/zone": "z2"}),
        node("gb200-0", product="NVIDIA-GB200"),
        node("l40s-1", product="NVIDIA-L40S-SHARED"),
        node("l40s-2", product="NVIDIA-L40S-SHARED",
             labels={"nvidia.com/gpu.sharing-strategy": "time-slicing"}),
        node("a100-0", product="NVIDIA-A100", labels={"nvidia.com/mig.config": "all-3g.40gb"}),
        node("other-0", product="NVIDIA-T4"),  # no flavor: its product named in the error
        node("other-1", product="NVIDIA-V100"),
        node("cpu-1", gpus=0, product=None),
    ]  # fmt: skip
    for flavors in (FLAVORS, twins):
        matches = FlavorMatches(flavors)
        for _ in range(2):  # the second time from what was remembered
            for each in nodes:
                assert matches.of(each) == identify_flavor(each, flavors), each.name
                assert node_inventory(each, flavors, matches) == node_inventory(each, flavors)
    assert FlavorMatches(FLAVORS).of(nodes[6]).error == (
        "no flavor's node labels match this node (nvidia.com/gpu.product=NVIDIA-T4)"
    )


def test_a_flavor_without_labels_matches_nothing() -> None:
    assert identify_flavor(node("h100-3"), [FlavorSelector("any", {})]).flavor is None


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"unschedulable": True}, "cordoned"),
        ({"ready": False}, "not Ready"),
        ({"taints": [taint("node.kubernetes.io/unreachable", effect="NoExecute")]},
         "tainted node.kubernetes.io/unreachable:NoExecute"),
        ({"taints": [taint("node.cloudprovider.kubernetes.io/uninitialized", "true")]},
         "tainted node.cloudprovider.kubernetes.io/uninitialized:NoSchedule"),
        ({"gpus": 0}, "no h100 devices allocatable"),
    ],
    ids=["cordoned", "NotReady", "unreachable", "uninitialized", "without GPUs"],
)  # fmt: skip
def test_a_node_that_takes_no_new_pods_is_excluded_with_the_reason(
    options: dict[str, object], why: str
) -> None:
    facts = node_inventory(node("h100-4", **options), FLAVORS)
    assert (facts.flavor, facts.schedulable, facts.exclusion) == ("h100", False, why)


def test_a_taint_that_reserves_a_node_is_left_to_each_pods_tolerations() -> None:
    reserved = node("h100-5", taints=[taint("dedicated", "nlp"), taint("nvidia.com/gpu")])
    assert node_inventory(reserved, FLAVORS).schedulable
