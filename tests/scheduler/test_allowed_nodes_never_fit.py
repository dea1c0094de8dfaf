"""A pod set whose allowed nodes (nodeSelector, affinity, tolerations) can never hold it was
explained as "Higher-ranked work holds the capacity it needs: position 6 in queue nlp"
(``behind``). It can never fit as things stand: ``capacity``, never fits, a sentence naming
the node selector, and no place in line."""

from __future__ import annotations

from scheduler_builders import Case, pool, queue, run_case
from test_allowed_nodes import restricted

from gpupool.scheduler.types import PendingExplanation


def only_pending(case: Case) -> PendingExplanation:
    result = run_case(case)
    (pending,) = result.pending
    return pending


def test_no_node_matches_the_selector() -> None:
    pending = only_pending(
        Case(
            "nodeSelector zone-z, no node in zone-z",
            pool(2),
            [queue("team-a", deserved=16)],
            [restricted("nomatch", [], gpus=1)],
            want_not_admitted={"nomatch"},
        )
    )
    assert pending.reason == "capacity"
    assert pending.facts.get("never_fits") is True
    assert "node selector" in pending.detail
    assert "position" not in pending.detail


def test_the_allowed_nodes_are_too_small_ever() -> None:
    pending = only_pending(
        Case(
            "allowed n1 only (8 GPUs), asks 16",
            pool(2),
            [queue("team-a", deserved=16)],
            [restricted("small", ["n1"], gpus=8, count=2)],
            want_not_admitted={"small"},
        )
    )
    assert pending.reason == "capacity"
    assert pending.facts.get("never_fits") is True
    assert "node selector" in pending.detail and "16" in pending.detail
