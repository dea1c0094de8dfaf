"""Pods asking a GPU resource no flavor offers are refused with a word (the tester's issue 2).

A pod asking ``nvidia.com/mig-1g.10gb`` where no flavor has that MIG profile could not become a
workload (a pod set asking GPUs names its flavor): the registration failed with a WARNING log
line only -- no Event on the pod, nothing in the API or on the pages. It is now refused as
malformed pods are: a Warning Event names the resource, and the cycle's record lists it with
the pods gpupool will not schedule. A pending workload whose pods turn so is left out of the
plan, explained.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest
from loop_builders import World, build_world

from gpupool.clusters.base import PodKey, ResourceAmounts
from gpupool.control.models import SchedulingCycle
from gpupool.inventory.models import Flavor
from gpupool.inventory.units import FlavorUnits
from gpupool.workloads.models import Workload
from gpupool.workloads.queries import AS_WRITTEN, summary

pytestmark = pytest.mark.django_db


def mig_pod(world: World, name: str, workload: str, profile: str = "1g.10gb") -> PodKey:
    """A kubectl pod asking one MIG instance of ``profile``."""
    key = world.cluster.add_pod(name, workload=workload, gpus=0)
    pod = world.cluster.pods[key]
    world.cluster.pods[key] = dataclasses.replace(
        pod, requests=ResourceAmounts(1000, 1024, 0, {profile: 1})
    )
    return key


def refused() -> dict[str, object]:
    latest = SchedulingCycle.objects.order_by("-id").first()
    assert latest is not None and latest.status == "succeeded"
    return latest.outcome["refused_pods"]


def test_a_mig_profile_no_flavor_offers_is_refused_with_an_event_and_listed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = build_world(nodes=1)
    pod = mig_pod(world, "mig-1g", "mig-1g")
    world.cluster.add_pod("good", gpus=1)
    with caplog.at_level(logging.WARNING):
        world.cycle()
        world.cycle()
    assert "could not register a workload" not in caplog.text
    assert not Workload.objects.filter(name="mig-1g").exists()
    assert world.workload("good").state == "admitted"  # the others are scheduled as usual
    why = (
        "gpupool will not schedule these pods: pod mig-1g: no flavor offers nvidia.com/mig-1g.10gb"
    )
    assert world.cluster.events_on(pod) == [("FailedScheduling", why, "Warning")]  # once
    assert refused() == {
        "count": 1,
        "workloads": [{"workload": "team-a/mig-1g", "pods": 1, "why": why}],
    }


def test_whole_gpus_with_no_exclusive_flavor_are_refused_the_same_way() -> None:
    """The same path for ``nvidia.com/gpu`` in a pool whose only flavor shares its GPUs."""
    world = build_world(nodes=0)
    Flavor.objects.filter(pk=world.h100.pk).update(sharing="shared")
    pod = world.cluster.add_pod("whole", gpus=1)
    world.cycle()
    assert not Workload.objects.filter(name="whole").exists()
    ((reason, message, kind),) = world.cluster.events_on(pod)
    assert (reason, kind) == ("FailedScheduling", "Warning")
    assert message.endswith("pod whole: no exclusive flavor offers whole GPUs (nvidia.com/gpu)")


def test_a_pending_workload_whose_new_pod_asks_an_unoffered_profile_is_left_out_and_says_why() -> (
    None
):
    world = build_world(nodes=1)
    world.submit("filler", gpus=8)  # the node is taken: the next one waits
    world.cycle()
    world.cycle()
    world.cluster.add_pod("later-0", workload="later", gpus=1)
    world.cycle()
    assert world.workload("later").state == "pending"
    mig_pod(world, "later-1", "later")
    world.cycle()
    later = world.workload("later")
    assert later.state == "pending"
    assert later.pod_sets.count() == 1  # the pod sets are not rewritten without a flavor
    said = summary(later, seen=AS_WRITTEN, units=FlavorUnits())
    assert "gpupool does not schedule it" in said
    assert "pod later-1: no flavor offers nvidia.com/mig-1g.10gb" in said
