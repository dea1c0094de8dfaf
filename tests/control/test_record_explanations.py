"""Which pending workloads' explanations a cycle writes (``record.decide_record``): one whose
reason changed at once; one whose numbers alone moved once its last write is
``POSITION_REFRESH_S`` old, the oldest first, ``REFRESHED_PER_CYCLE`` a cycle; an unchanged
one never. Plain values, no database."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gpupool.control import record as record_module
from gpupool.control.record import Explanation, decide_record, json_facts
from gpupool.control.snapshot import DatabaseSnapshot
from gpupool.scheduler.types import PendingExplanation, Plan, PodSetInfo, Snapshot, WorkloadInfo

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
    )


def waiting(name: str, reason: str = "quota", free: int = 0) -> PendingExplanation:
    facts = {"queue": "team-a", "free_gpus": free, "asked": (1, 2)}
    return PendingExplanation(name, reason, f"waits for {free} GPUs", 1, facts)  # type: ignore[arg-type]


def written_as(pending: PendingExplanation) -> Explanation:
    return Explanation(pending.reason, pending.detail, json_facts(pending.facts), pending.position)


def decide(pending: list[PendingExplanation], written: dict[int, Explanation],
           written_at: dict[int, float], refresh_before: float) -> set[int]:  # fmt: skip
    plan = Plan((), (), tuple(pending))
    at = datetime.fromtimestamp(NOW, tz=UTC)
    record = decide_record(
        database(), plan, {}, at, written=written, written_at=written_at,
        refresh_before=refresh_before, facts_cache={},
    )  # fmt: skip
    return set(record.explanations)


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
