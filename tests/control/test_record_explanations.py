"""Which pending workloads' explanations a cycle writes (``record.decide_record``): one whose
reason changed at once (and only that one gets an Event); one whose facts alone moved once its
last write is ``FACTS_REFRESH_S`` old, the oldest first, ``REFRESHED_PER_CYCLE`` a cycle; one
whose position alone moved, or unchanged, never. And the queue ranks positions are counted
from (``record.queue_ranks``): kept while the order around them holds. Plain values, no
database."""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime
from decimal import Decimal
from types import MappingProxyType

import pytest

from gpupool.control import record as record_module
from gpupool.control.record import (
    CycleRecord,
    Explanation,
    decide_record,
    json_facts,
    queue_ranks,
)
from gpupool.control.snapshot import DatabaseSnapshot
from gpupool.scheduler.cycle import plan_of, run_cycle
from gpupool.scheduler.explain import Verdict, explanation, flavor_units
from gpupool.scheduler.types import PendingExplanation, Plan, PodSetInfo, Snapshot, WorkloadInfo
from gpupool.simulation.scale_pool import synthetic_snapshot
from gpupool.workloads.choices import WorkloadState
from gpupool.workloads.queries import AS_WRITTEN, says_position, sentence

NOW = 1_800_000_000.0
NAMES = [f"team-a/w{index}" for index in range(6)]


def database() -> DatabaseSnapshot:
    workloads = tuple(
        WorkloadInfo(
            name, "team-a", "normal", (PodSetInfo(count=1, gpus=1, flavors=("h100",)),), NOW - 60
        )
        for name in NAMES
    )
    return DatabaseSnapshot(
        Snapshot((), (), (), (), workloads),
        NOW,
        {name: index + 1 for index, name in enumerate(NAMES)},
        {name: (index + 1,) for index, name in enumerate(NAMES)},
        {},
        {},
        {},
        {w.name: w for w in workloads},
    )


def waiting(
    name: str, reason: str = "quota", free: int = 0, position: int = 1
) -> PendingExplanation:
    facts = {"queue": "team-a", "free_gpus": free, "asked": (1, 2)}
    detail = f"waits for {free} GPUs: position {position}"
    return PendingExplanation(name, reason, detail, position, facts)  # type: ignore[arg-type]


def written_as(pending: PendingExplanation) -> Explanation:
    return Explanation(pending.reason, pending.detail, json_facts(pending.facts))


def recorded(pending: list[PendingExplanation], written: dict[int, Explanation],
             written_at: dict[int, float], refresh_before: float,
             ranks: dict[int, float] | None = None) -> CycleRecord:  # fmt: skip
    plan = Plan((), (), tuple(pending))
    at = datetime.fromtimestamp(NOW, tz=UTC)
    return decide_record(
        database(), plan, {}, at, written=written, written_at=written_at,
        refresh_before=refresh_before, facts_cache={}, ranks=ranks,
    )  # fmt: skip


def decide(pending: list[PendingExplanation], written: dict[int, Explanation],
           written_at: dict[int, float], refresh_before: float) -> set[int]:  # fmt: skip
    return set(recorded(pending, written, written_at, refresh_before).explanations)


def test_a_new_or_changed_reason_is_written_at_once_and_an_unchanged_explanation_never() -> None:
    before = [waiting(NAMES[0]), waiting(NAMES[1]), waiting(NAMES[2])]
    written = {1: written_as(before[0]), 2: written_as(before[1])}  # w2 never written
    now = [waiting(NAMES[0]), waiting(NAMES[1], reason="fragmentation"), waiting(NAMES[2])]

    # w0's last write is fresh, w1 changed its reason, w2 is new: w1 and w2 are written.
    assert decide(now, written, {1: 100.0, 2: 100.0}, refresh_before=50.0) == {2, 3}
    # Old enough to refresh, but unchanged: w0 is not written again.
    assert decide(now, written, {1: 10.0, 2: 100.0}, refresh_before=50.0) == {2, 3}


def test_moved_numbers_wait_until_the_last_write_is_old_and_go_oldest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(record_module, "REFRESHED_PER_CYCLE", 2)
    written = {index + 1: written_as(waiting(name, free=1)) for index, name in enumerate(NAMES)}
    moved = [waiting(name, free=2) for name in NAMES]
    # w0 was written most recently (not due); w3 is unchanged; the rest moved and are due.
    moved[3] = waiting(NAMES[3], free=1)
    written_at = {1: 90.0, 2: 40.0, 3: 10.0, 4: 5.0, 5: 30.0, 6: 20.0}

    # Due and moved: w1 (40), w2 (10), w4 (30), w5 (20); the two oldest go: w2, w5.
    assert decide(moved, written, written_at, refresh_before=50.0) == {3, 6}
    # Nothing due yet: nothing whose reason is unchanged is written.
    assert decide(moved, written, written_at, refresh_before=1.0) == set()


def test_a_moved_position_alone_writes_no_explanation_and_sends_no_event() -> None:
    written = {1: written_as(waiting(NAMES[0], position=4))}
    moved = [waiting(NAMES[0], position=1)]  # the work ahead was admitted
    record = recorded(moved, written, {1: 10.0}, refresh_before=50.0, ranks={1: 4.0})
    assert record.explanations == {} and record.new_reasons == set()
    assert record.ranks == {}  # its rank still orders it: nothing to write


def test_only_a_new_reason_is_sent_as_an_event_moved_facts_are_written_quietly() -> None:
    written = {1: written_as(waiting(NAMES[0])), 2: written_as(waiting(NAMES[1]))}
    now = [waiting(NAMES[0], free=3), waiting(NAMES[1], reason="capacity")]
    record = recorded(now, written, {1: 10.0, 2: 10.0}, refresh_before=50.0)
    assert set(record.explanations) == {1, 2}
    assert record.new_reasons == {2}


def test_a_loop_that_does_not_know_the_ranks_writes_them_all_and_clears_the_rest() -> None:
    now = [waiting(name, position=index + 1) for index, name in enumerate(NAMES[:3])]
    record = recorded(now, {}, {}, refresh_before=0.0, ranks=None)
    assert record.ranks_whole and record.ranks == {1: 1.0, 2: 2.0, 3: 3.0}
    known = recorded(now, {}, {}, refresh_before=0.0, ranks={1: 1.0, 2: 2.0, 3: 3.0, 9: 4.0})
    assert not known.ranks_whole and known.ranks == {9: None}  # 9 left the queue's order


def test_ranks_are_kept_while_the_order_around_them_holds() -> None:
    before = {1: 1.0, 2: 2.0, 3: 3.0, 4: 4.0}
    assert queue_ranks([2, 3, 4], before) == {}  # 1 was admitted: nothing behind it moves
    assert queue_ranks([1, 2, 3, 4, 5], before) == {5: 5.0}  # new work at the end
    assert queue_ranks([1, 5, 6, 2, 3, 4], before) == {5: 1 + 1 / 3, 6: 1 + 2 / 3}
    assert queue_ranks([5, 1, 2], before) == {5: 0.0}  # ahead of everything
    assert queue_ranks([4, 1, 2, 3], before) == {4: 0.0}  # one moved: only it is written
    assert queue_ranks([], before) == {}


def test_ranks_are_numbered_again_when_no_key_fits_between_two() -> None:
    tight = {1: 1.0, 2: math.nextafter(1.0, 2.0)}
    assert queue_ranks([1, 5, 2], tight) == {5: 2.0, 2: 3.0}


def test_ranks_written_cycle_after_cycle_always_give_the_served_order() -> None:
    rng = random.Random(14)
    ranks: dict[int, float] = {}
    order: list[int] = []
    next_id = 1
    writes = 0
    for _ in range(300):
        order = [pk for pk in order if rng.random() > 0.1]  # some are admitted
        for _ in range(rng.randint(0, 4)):  # new work, mostly at the end
            at = len(order) if rng.random() < 0.7 else rng.randint(0, len(order))
            order.insert(at, next_id)
            next_id += 1
        if len(order) > 2 and rng.random() < 0.3:  # one jumps ahead (priority, starvation)
            order.insert(rng.randint(0, 1), order.pop(rng.randrange(2, len(order))))
        written = queue_ranks(order, ranks)
        writes += len(written)
        ranks = {pk: written.get(pk, ranks.get(pk, 0.0)) for pk in order}
        assert sorted(order, key=ranks.__getitem__) == order
        assert len(set(ranks.values())) == len(order)
    assert writes < next_id * 2  # about one write per workload, not one per cycle


def test_a_reader_says_the_cores_sentence_at_the_position_it_counts() -> None:
    snapshot, policy, now = synthetic_snapshot(300, 7)
    plan = plan_of(run_cycle(snapshot, policy, now))
    units = flavor_units(snapshot.flavors)  # as the core says them
    seen: set[str] = set()
    for pending in plan.pending:
        facts = json_facts(pending.facts)  # as the database gives them back
        seen.add(pending.reason)
        if says_position(pending.reason, facts):
            said = sentence(
                pending.reason, facts, pending.position, "?", AS_WRITTEN, units=units, zone=UTC
            )
            assert said == pending.detail
            moved = sentence(
                pending.reason, facts, pending.position + 3, "?", AS_WRITTEN, units=units, zone=UTC
            )
            assert moved != pending.detail and str(pending.position + 3) in moved
        else:  # the sentence as written stays right: it does not say the position
            verdict = Verdict(pending.reason, pending.facts)
            again = explanation("", verdict, pending.position + 3, units)
            assert again.detail == pending.detail
            assert sentence(
                pending.reason,
                facts,
                pending.position + 3,
                "as written",
                AS_WRITTEN,
                units=units,
                zone=UTC,
            ) == ("as written")
    assert "behind" in seen and len(seen) >= 3


@pytest.mark.parametrize(
    "facts",
    [
        {"queue": "q", "asked_gpus": 16.0, "never_fits": False, "nodes": ("n1", "n2")},
        {"b": 1, "a": [1, (2, 3)], "nested": {"z": None, "y": "é"}, "big": 2**70},
        {"inf": float("inf"), "nan_free": 1.5},
        {"decimal": Decimal("1.50"), "when": datetime(2026, 1, 1, tzinfo=UTC)},
        {"keys": {1: "one", 2: "two"}, "flag": True},
        {"enum": WorkloadState.PENDING, "proxy": MappingProxyType({"a": 1})},
    ],
)
def test_facts_in_their_json_form_equal_a_json_round_trip(facts: dict[str, object]) -> None:
    expected = json.loads(json.dumps(facts, default=str, sort_keys=True))
    got = json_facts(facts)
    assert got == expected
    assert json.dumps(got) == json.dumps(expected)  # the same keys in the same order
