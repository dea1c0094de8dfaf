"""A scheduling cycle's record samples the pool's fragmentation (free and fragmented GPUs,
the largest gang in one domain, per flavor) about once a minute of cluster time, for the
dashboard's trend."""

from __future__ import annotations

import pytest
from loop_builders import build_world

from gpupool.control.models import SchedulingCycle

pytestmark = pytest.mark.django_db


def test_a_cycle_samples_the_fragmentation_once_a_minute(db: None) -> None:
    world = build_world(nodes=2)
    world.submit("train", gpus=4)
    first = world.cycle()
    second = world.cycle()
    world.cluster.tick(61)
    third = world.cycle()
    samples = [
        SchedulingCycle.objects.get(pk=result.cycle_id).outcome.get("fragmentation")
        for result in (first, second, third)
    ]
    # two 8-GPU nodes, each its own domain; the first cycle makes the pods, the next admits
    assert samples[0] == {"h100": {"free": 16.0, "fragmented": 0.0, "largest_gang": 8}}
    assert samples[1] is None  # the same minute
    assert samples[2] == {"h100": {"free": 12.0, "fragmented": 0.0, "largest_gang": 8}}
