"""A cycle sends at most ``EVENTS_PER_CYCLE`` explanation Events (the API server is not
flooded after a first cycle that explains thousands of workloads), and yet a reason just found
is not held behind that backlog: half of each cycle's Events go to the newest reasons, half to
the oldest, and a workload's waiting pods get theirs in the same cycle."""

from __future__ import annotations

import pytest
from django.db import connection
from loop_builders import World, build_world

from gpupool.control import loop as loop_module
from gpupool.control.apply import explanations_due
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None, monkeypatch: pytest.MonkeyPatch) -> World:
    """Two full 8-GPU nodes and a budget of two Events a cycle."""
    monkeypatch.setattr(loop_module, "EVENTS_PER_CYCLE", 2)
    built = build_world()
    for name in "xy":
        built.cluster.add_pod(f"{name}-0", workload=name, gpus=8)
    built.cycle()
    built.cluster.run()
    return built


def test_explanations_go_out_newest_then_oldest_alternately() -> None:
    assert list(explanations_due(["a", "b", "c", "d", "e"])) == ["e", "a", "d", "b", "c"]
    assert list(explanations_due(["a"])) == ["a"]
    assert list(explanations_due([])) == []


def _next_workload_ids_straddle_a_multiple_of_32() -> None:
    """The next six workloads made get ids 32k - 2 to 32k + 3, above every id there is:
    a set of them (32 slots) iterates 32k ... 32k + 3, then 32k - 2, 32k - 1 -- out of
    their order (PostgreSQL's sequence, SQLite's AUTOINCREMENT counter, set by hand)."""
    table = Workload._meta.db_table
    largest = Workload.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    last = (largest // 32 + 2) * 32 - 3  # the id before the first of the six
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT setval(pg_get_serial_sequence(%s, 'id'), %s)", [table, last])
        else:
            cursor.execute("UPDATE sqlite_sequence SET seq = %s WHERE name = %s", [last, table])


# Ids as the database gives them, and ids whose set iterates out of their order, which made
# the "newest" of a cycle's new reasons whichever hashed last.
@pytest.mark.parametrize("wrapping", [False, True], ids=["ids as given", "ids out of set order"])
def test_a_new_workload_s_event_is_not_held_behind_the_backlog_which_still_drains(
    world: World, wrapping: bool
) -> None:
    if wrapping:
        _next_workload_ids_straddle_a_multiple_of_32()
    backlog = {
        f"w{i}": world.cluster.add_pod(f"w{i}-0", workload=f"w{i}", gpus=8) for i in range(6)
    }
    world.cycle()  # six new reasons, two Events: the newest and the oldest
    if wrapping:
        ids = list(Workload.objects.filter(name__in=backlog).order_by("name").values_list("pk"))
        assert [pk % 32 for (pk,) in ids] == [30, 31, 0, 1, 2, 3]
    sent = {name for name, key in backlog.items() if world.cluster.events_on(key)}
    assert sent == {"w0", "w5"}

    world.cluster.tick(10)
    late = world.cluster.add_pod("late-0", workload="late", gpus=8)
    world.cycle()
    # The reason found this cycle goes out in this cycle, before the four still queued ...
    assert [reason for reason, _, _ in world.cluster.events_on(late)] == ["Waiting"]
    # ... and the oldest of the backlog goes out beside it.
    sent = {name for name, key in backlog.items() if world.cluster.events_on(key)}
    assert sent == {"w0", "w1", "w5"}

    for _ in range(2):
        world.cycle()
    # The backlog drained: every waiting pod has its one Event.
    assert all(len(world.cluster.events_on(key)) == 1 for key in backlog.values())
    assert len(world.cluster.events_on(late)) == 1


def test_a_gang_s_waiting_pods_get_their_event_in_one_cycle_beyond_the_budget(
    world: World,
) -> None:
    gang = [world.cluster.add_pod(f"g-{i}", workload="g", gpus=8) for i in range(3)]
    world.cycle()
    # Three pods, a budget of two: none of them is left without the sentence.
    assert all(len(world.cluster.events_on(key)) == 1 for key in gang)
