"""The four lines of one flavor's hour, as plain numbers: nesting, scaling, and the limits."""

from __future__ import annotations

from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.accounting.attribution import Steps, attribute_hour

D = Decimal
LINES = ("used_within_guarantee", "reserved_idle", "used_above_guarantee", "pool_idle")


def lines_of(result: object) -> tuple[Decimal, ...]:
    return tuple(getattr(result, line) for line in LINES)


def queue_lines(result: object, queue: int) -> tuple[Decimal, Decimal, Decimal]:
    part = result.queues[queue]  # type: ignore[attr-defined]
    return (part.used_within_guarantee, part.reserved_idle, part.used_above_guarantee)


FLAT = {1: None, 2: 1, 3: 1, 4: 1}  # root 1 with teams 2, 3, 4


def test_a_flat_tree_counts_min_of_allocated_and_guarantee() -> None:
    result = attribute_hour(
        capacity=D(16),
        guarantees={2: D(6), 3: D(4)},
        allocated={2: D(8), 3: D(1), 4: D(2)},
        parents=FLAT,
    )
    assert queue_lines(result, 2) == (6, 0, 2)
    assert queue_lines(result, 3) == (1, 3, 0)
    assert queue_lines(result, 4) == (0, 0, 2)
    assert lines_of(result) == (7, 3, 4, 2)


ORG = {1: None, 10: 1, 11: 10, 12: 10}  # root 1, org 10 with teams 11 and 12


def test_a_child_above_its_guarantee_shares_its_parents_unheld_guarantee() -> None:
    # org holds 16, of which team 11 holds 8; 11 uses 12 and 12 (no guarantee) uses 6:
    # the org's unheld 8 is shared 4 : 6 between their 4 and 6 GPU-hours beyond guarantees.
    result = attribute_hour(
        capacity=D(32),
        guarantees={10: D(16), 11: D(8)},
        allocated={11: D(12), 12: D(6)},
        parents=ORG,
    )
    assert queue_lines(result, 11) == (D("11.2"), 0, D("0.8"))
    assert queue_lines(result, 12) == (D("4.8"), 0, D("1.2"))
    assert result.queues[10].reserved_idle == 0
    assert lines_of(result) == (16, 0, 2, 14)


def test_an_idle_child_guarantee_is_reserved_by_the_child_not_by_its_parent() -> None:
    result = attribute_hour(
        capacity=D(16), guarantees={10: D(10), 11: D(4)}, allocated={12: D(3)}, parents=ORG
    )
    assert queue_lines(result, 11) == (0, 4, 0)
    assert queue_lines(result, 12) == (3, 0, 0)
    assert result.queues[10].reserved_idle == 3
    assert lines_of(result) == (3, 7, 0, 6)


def test_guarantees_above_the_healthy_capacity_are_scaled_down_in_proportion() -> None:
    result = attribute_hour(
        capacity=D(12), guarantees={2: D(8), 3: D(8)}, allocated={2: D(2)}, parents=FLAT
    )
    assert result.scale == D("0.75")
    assert (result.queues[2].guarantee, result.queues[3].guarantee) == (6, 6)
    assert lines_of(result) == (2, 10, 0, 0)


def test_reserved_idle_shrinks_to_the_idle_capacity_when_an_hour_holds_both() -> None:
    # Averages over the hour: 12 used above guarantee and 8 of guarantee left idle cannot
    # both fit in 16; the reserved idle gets what was idle.
    result = attribute_hour(
        capacity=D(16), guarantees={2: D(8)}, allocated={4: D(12)}, parents=FLAT
    )
    assert lines_of(result) == (0, 4, 12, 0)


def test_usage_above_the_recorded_capacity_counts_as_capacity() -> None:
    result = attribute_hour(capacity=D(8), guarantees={}, allocated={4: D(10)}, parents=FLAT)
    assert result.capacity == 10
    assert lines_of(result) == (0, 0, 10, 0)


def test_a_step_value_is_averaged_over_the_time_each_value_was_in_force() -> None:
    hour = 3_600_000_000
    price = Steps([(0, D(2)), (hour // 4, D(4))])
    assert price.average(0, hour) == D("3.5")
    assert price.average(hour, 2 * hour) == 4
    assert Steps([(hour, D(5))], before=D(0)).average(0, 2 * hour) == D("2.5")
    assert Steps([(hour, D(5))]).at(0) == 5  # before the first change: the first value


amounts = st.decimals(min_value=0, max_value=64, places=4, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    capacity=amounts,
    parents=st.lists(st.integers(min_value=0, max_value=20), min_size=1, max_size=12),
    guarantees=st.lists(amounts, min_size=12, max_size=12),
    allocated=st.lists(amounts, min_size=12, max_size=12),
    guaranteed=st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_the_lines_never_go_negative_and_always_add_up_to_the_capacity(
    capacity: Decimal,
    parents: list[int],
    guarantees: list[Decimal],
    allocated: list[Decimal],
    guaranteed: list[bool],
) -> None:
    # A random tree: queue i + 1's parent is an earlier queue (0 is the root).
    tree: dict[int, int | None] = {0: None}
    for index, pick in enumerate(parents, start=1):
        tree[index] = pick % index
    held = {q: guarantees[q % 12] for q in tree if q and guaranteed[q % 12]}
    # Nested guarantees fit inside their parents' (the quota rules see to it).
    for queue in sorted(held, reverse=True):
        parent = tree[queue]
        while parent is not None and parent not in held:
            parent = tree[parent]
        if parent is not None:
            siblings = sum(v for q, v in held.items() if q != queue and tree[q] == parent)
            held[queue] = min(held[queue], max(held[parent] - siblings, D(0)))
    used = {q: allocated[q % 12] for q in tree if q and q not in set(tree.values())}
    result = attribute_hour(capacity=capacity, guarantees=held, allocated=used, parents=tree)
    assert all(value >= 0 for value in lines_of(result))
    assert sum(lines_of(result)) == result.capacity >= capacity
    for part in result.queues.values():
        assert part.used_within_guarantee >= 0 and part.used_above_guarantee >= 0
        assert part.reserved_idle >= 0
        assert part.used_within_guarantee + part.used_above_guarantee == part.allocated
    assert result.used_within_guarantee + result.used_above_guarantee == result.used


def test_nested_guarantees_are_scaled_as_the_decision_core_scales_them() -> None:
    # The org's 10 are scaled to the 5 healthy GPUs; its team's 5 still fit in them, so the
    # team keeps its guarantee (the core scales a group only where it no longer fits).
    result = attribute_hour(
        capacity=D(5), guarantees={10: D(10), 11: D(5)}, allocated={11: D(1)}, parents=ORG
    )
    assert (result.queues[10].guarantee, result.queues[11].guarantee) == (5, 5)
    assert queue_lines(result, 11) == (1, 4, 0)
    assert result.queues[10].reserved_idle == 0
    assert lines_of(result) == (1, 4, 0, 0)
