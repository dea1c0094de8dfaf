"""Deserved shares, computed by hand: the pool split down the tree, deserved quota first,
the rest by weight up to capability (``gpupool/quotas/shares.py`` defines them)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gpupool.quotas.shares import PoolShape, QueueShape, deserved_shares, share_changes


def leaf(
    name: str,
    guarantee: float,
    deserved: float,
    capability: float,
    *,
    parent: str = "pool",
    weight: float = 1.0,
) -> QueueShape:
    """A queue with an h100 quota."""
    return QueueShape(name, parent, name, weight, {"h100": (guarantee, deserved, capability)})


ROOT = QueueShape("pool", None)


@dataclass(frozen=True)
class Case:
    """A pool, and the h100 shares worked out by hand."""

    name: str
    gpus: float
    queues: tuple[QueueShape, ...]
    want: dict[str, float]


CASES = [
    Case(
        "everyone gets their deserved quota and the rest goes by weight up to capability",
        # floors 8 + 16 + 0 = 24 of 32; 8 left. At level L each gets clamp(L x weight,
        # deserved, capability): a = max(8, L), b = 16, c = min(2L, 8); L = 4 gives 32.
        32,
        (ROOT, leaf("a", 0, 8, 32), leaf("b", 4, 16, 16), leaf("c", 0, 0, 8, weight=2)),
        {"pool": 32, "a": 8, "b": 16, "c": 8},
    ),
    Case(
        "idle capacity is split by weight among queues above their floors",
        # floors 2 + 2 = 4 of 16; L x 1 + L x 3 = 16 at L = 4: a = 4, b = 12
        16,
        (ROOT, leaf("a", 0, 2, 16), leaf("b", 0, 2, 16, weight=3)),
        {"pool": 16, "a": 4, "b": 12},
    ),
    Case(
        "a queue's floor holds while the other takes what is left",
        # a's floor 10 > L; b takes 16 - 10 = 6 (L = 6)
        16,
        (ROOT, leaf("a", 0, 10, 16), leaf("b", 0, 0, 16)),
        {"pool": 16, "a": 10, "b": 6},
    ),
    Case(
        "when the caps are reached the rest of the pool stays idle",
        32,
        (ROOT, leaf("a", 0, 4, 6), leaf("b", 0, 4, 10)),
        {"pool": 16, "a": 6, "b": 10},
    ),
    Case(
        "deserved quotas beyond the pool shrink in proportion above the guarantees",
        # floors 16 + 16 = 32 > 24; guarantees 8 + 0 first, the 16 left in proportion to
        # deserved minus guarantee (8 : 16): a = 8 + 16/3, b = 32/3
        24,
        (ROOT, leaf("a", 8, 16, 16), leaf("b", 0, 16, 16)),
        {"pool": 24, "a": 13.333, "b": 10.667},
    ),
    Case(
        "guarantees beyond the pool shrink in proportion, as the core scales them",
        8,
        (ROOT, leaf("a", 8, 8, 8), leaf("b", 4, 4, 4)),
        {"pool": 8, "a": 5.333, "b": 2.667},
    ),
    Case(
        "a leaf without a quota of the flavor gets none",
        8,
        (ROOT, leaf("a", 0, 0, 8), QueueShape("b", "pool")),
        {"pool": 8, "a": 8, "b": 0},
    ),
    Case(
        "an inner queue splits its share among its children the same way",
        # org (no quota) passes up its children's floors 4 + 0 and caps 8 + 8. At the top,
        # org and c both have floor 4: by weight, org = c = 8 (L = 8). Inside org, x keeps
        # its floor 4 and y gets the other 4 (L = 4).
        16,
        (
            ROOT,
            QueueShape("org", "pool"),
            leaf("x", 0, 4, 8, parent="org"),
            leaf("y", 0, 0, 8, parent="org"),
            leaf("c", 0, 4, 16),
        ),
        {"pool": 16, "org": 8, "x": 4, "y": 4, "c": 8},
    ),
    Case(
        "an inner queue's own capability caps its subtree",
        # org's capability 4 caps it (floor 2); c takes the other 12 (L = 12); x gets org's 4
        16,
        (
            ROOT,
            QueueShape("org", "pool", None, 1.0, {"h100": (0, 2, 4)}),
            leaf("x", 0, 2, 8, parent="org"),
            leaf("c", 0, 2, 16),
        ),
        {"pool": 16, "org": 4, "x": 4, "c": 12},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_deserved_shares_are_the_hand_computed_ones(case: Case) -> None:
    shares = deserved_shares(PoolShape(case.queues, {"h100": case.gpus}))
    got = {queue: shares[(queue, "h100")] for queue in case.want}
    assert got == pytest.approx(case.want, abs=0.001)


def test_the_shares_of_every_level_add_up_to_their_parent_s() -> None:
    case = CASES[-2]
    shares = deserved_shares(PoolShape(case.queues, {"h100": case.gpus}))
    assert shares[("x", "h100")] + shares[("y", "h100")] == shares[("org", "h100")]
    assert shares[("org", "h100")] + shares[("c", "h100")] == case.gpus


def test_raising_one_queue_s_deserved_quota_moves_the_shares_it_takes_from() -> None:
    # the first case with a's deserved quota raised from 8 to 12: floors 12 + 16 + 0 = 28,
    # 4 left for c (weight 2, L = 2): a 8 -> 12, c 8 -> 4, b unchanged
    before = PoolShape(CASES[0].queues, {"h100": 32})
    after = before.with_quota("a", "h100", 0, 12, 32)
    moved = [(c.queue, c.before, c.after, c.change) for c in share_changes(before, after)]
    assert moved == [("a", 8, 12, 4), ("c", 8, 4, -4)]


def test_a_change_to_an_unknown_queue_is_refused() -> None:
    with pytest.raises(KeyError):
        PoolShape((ROOT,), {"h100": 8}).with_quota("nowhere", "h100", 0, 1, 1)
