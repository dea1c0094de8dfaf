"""``apply.queued_explanations_due``: the Events' order of ``explanations_due`` over the loop's
explanation queue with this cycle's new reasons moved last, taken from both ends of the queue
as it is, not from a copy of it built every cycle (thousands queued, a few hundred sent)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from itertools import islice

from gpupool.control.apply import explanations_due, queued_explanations_due


def _moved_last(older: dict[str, str], fresh: dict[str, str]) -> list[tuple[str, str]]:
    return [(n, d) for n, d in older.items() if n not in fresh] + list(fresh.items())


def test_the_order_is_that_of_the_queue_with_the_new_reasons_moved_last() -> None:
    rng = random.Random(7)
    for _ in range(300):
        names = [f"w{i}" for i in range(rng.randint(0, 12))]
        older = {n: f"old {n}" for n in names if rng.random() < 0.6}
        fresh = {n: f"new {n}" for n in rng.sample(names, rng.randint(0, len(names)))}
        expected = list(explanations_due(_moved_last(older, fresh)))
        assert list(queued_explanations_due(older, fresh)) == expected


class _Counted(Mapping[str, str]):
    """A queue that counts the entries walked from either end."""

    def __init__(self, entries: dict[str, str]) -> None:
        self.entries = entries
        self.walked = 0

    def __getitem__(self, name: str) -> str:
        return self.entries[name]

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def __iter__(self) -> Iterator[str]:
        for name in self.entries:
            self.walked += 1
            yield name

    def __reversed__(self) -> Iterator[str]:
        for name in reversed(self.entries):
            self.walked += 1
            yield name


def test_a_cycle_walks_only_the_entries_it_sends() -> None:
    older = _Counted({f"w{i}": "waits" for i in range(10_000)})
    fresh = {"w5": "new", "n1": "new"}
    taken = list(islice(queued_explanations_due(older, fresh), 6))  # type: ignore[arg-type]
    assert taken[:2] == [("n1", "new"), ("w0", "waits")]
    assert len(taken) == 6
    assert older.walked < 20
