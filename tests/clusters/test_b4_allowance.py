"""B4's replay of the client's bucket over a run's bindings (``allowance_lost``): where the
turns a full bucket could not hold were lost. No plane needed."""

from __future__ import annotations

import math

import pytest

from tests.clusters.test_b4_benchmark import b4_module

b4 = b4_module()


def test_a_binder_at_the_limit_from_the_first_creation_loses_no_turn() -> None:
    lost = b4.allowance_lost([i / 100 for i in range(3600)], 100.0, 200)
    assert lost(math.inf) == pytest.approx(0.0)


def test_the_turns_before_the_first_binding_are_lost_then_none_while_the_bindings_keep_up() -> None:
    # First binding 0.3 s after the first creation, then 150 a second: the bucket drains.
    lost = b4.allowance_lost([0.3 + i / 150 for i in range(3600)], 100.0, 200)
    assert lost(0.1) == pytest.approx(0.1)
    assert lost(0.3) == pytest.approx(0.3)
    assert lost(5.0) == lost(math.inf) == pytest.approx(0.3)


def test_a_stall_while_the_bucket_is_nearly_full_loses_its_length_once_it_is_full() -> None:
    # 10 bindings at 0.3 s, then none until 1.0 s: full again at 0.4 s, 0.6 s lost after it.
    lost = b4.allowance_lost([0.3] * 10 + [1.0 + i / 100 for i in range(3590)], 100.0, 200)
    assert lost(0.3) == pytest.approx(0.3)
    assert lost(0.4) == pytest.approx(0.3)
    assert lost(0.5) == pytest.approx(0.4)
    assert lost(2.0) == lost(math.inf) == pytest.approx(0.9)


def test_a_stall_in_the_middle_with_the_bucket_drawn_down_loses_nothing() -> None:
    # At the limit with the bucket empty (200 bound at once), then a 1.5 s stall: refilled
    # to 150 tokens, not full, and drawn down again.
    bound = [0.0] * 200 + [i / 100 for i in range(1, 501)]
    bound += [6.5 + i / 200 for i in range(400)]
    lost = b4.allowance_lost(bound, 100.0, 200)
    assert lost(math.inf) == pytest.approx(0.0)
