"""A scheduling cycle's record samples the pool's fragmentation (free and fragmented GPUs,
the largest gang in one domain, per flavor) about once a minute of cluster time, for the
dashboard's trend."""

from __future__ import annotations

import logging

import pytest
from loop_builders import build_world

from gpupool.control import loop as loop_module
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


def test_a_failed_sample_leaves_the_cycle_recorded_applied_and_succeeded(
    db: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The sample is taken after the apply: when it fails, the cycle's decisions are
    committed and its bindings sent, so the cycle succeeds without it (the row says no
    fragmentation, the log says why) and keeps its state; the next cycle samples again."""
    world = build_world(nodes=2)
    world.submit("train", gpus=4)
    world.cycle()  # makes the pods, and samples
    world.cluster.tick(61)  # a sample is due again

    def broken(*_: object) -> None:
        raise RuntimeError("sampler broke")

    monkeypatch.setattr(loop_module, "fragmentation_sample", broken)
    with caplog.at_level(logging.ERROR):
        admitted = world.loop.run_cycle()
    assert admitted.status == "succeeded", admitted.error
    assert admitted.admitted == ["team-a/train"]
    row = SchedulingCycle.objects.get(pk=admitted.cycle_id)
    assert row.status == "succeeded" and row.error == ""
    assert "fragmentation" not in row.outcome
    assert world.workload("train").state == "admitted"  # bound; running once its pods run
    assert "fragmentation sampling failed" in caplog.text
    assert not world.loop.first  # the state was kept, not read again

    monkeypatch.undo()
    after = world.cycle()  # due again at once: the failed one did not count as taken
    assert SchedulingCycle.objects.get(pk=after.cycle_id).outcome["fragmentation"] == {
        "h100": {"free": 12.0, "fragmented": 0.0, "largest_gang": 8}
    }
