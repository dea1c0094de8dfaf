"""A waiting pod's Event is sent again when its explanation's numbers moved and the last
Event is EVENT_REFRESH_S old: ``kubectl describe pod`` said "8 GPUs of quota available"
long after 7 were, because an Event was sent only when the reason changed."""

from __future__ import annotations

import time
import types
from typing import Any

import pytest
from loop_builders import World, build_world

from gpupool.control import loop as loop_module
from gpupool.control.loop import EVENT_REFRESH_S
from gpupool.control.record import FACTS_REFRESH_S

pytestmark = pytest.mark.django_db


class Clock:
    """The loop's monotonic clock, moved by the test (its timers are the wall's)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    moved = Clock()
    fake = types.SimpleNamespace(
        perf_counter=time.perf_counter, thread_time=time.thread_time, monotonic=moved.monotonic
    )
    monkeypatch.setattr(loop_module, "time", fake)
    return moved


def told(world: World, prefix: str) -> list[Any]:
    """The Events on the first pod whose name starts with ``prefix``."""
    key = min(key for key in world.cluster.pods if key[1].startswith(prefix))
    return world.cluster.events_on(key)


def test_moved_numbers_are_told_again_once_the_last_event_is_old(clock: Clock) -> None:
    world = build_world(nodes=3)
    world.submit("a-run", gpus=8)
    world.cycle()  # its pod is made
    world.cycle()  # admitted: team-a holds 8 of its 16
    world.cluster.run()
    world.submit("w", gpus=8, count=2)  # 16 more: 8 of quota left, so it waits on quota
    world.cycle()
    world.cycle()
    waiting = world.workload("w")
    assert waiting.state == "pending"
    first = waiting.pending_detail
    assert len(told(world, "w-")) == 1

    world.submit("a-one", gpus=1)  # admitted beside: 7 of quota left, the same reason
    clock.now += FACTS_REFRESH_S + 1
    world.cycle()
    world.cycle()
    clock.now += FACTS_REFRESH_S + 1
    world.cycle()
    assert world.workload("a-one").state in ("admitted", "running")
    moved = world.workload("w")
    assert (moved.pending_reason, moved.state) == (waiting.pending_reason, "pending")
    assert moved.pending_detail != first
    assert len(told(world, "w-")) == 1  # not yet: the last Event is recent

    clock.now += EVENT_REFRESH_S
    world.cycle()
    events = told(world, "w-")
    assert len(events) == 2
    assert events[-1][1] == moved.pending_detail

    clock.now += EVENT_REFRESH_S
    world.cycle()
    assert len(told(world, "w-")) == 2  # nothing moved since: not told again
