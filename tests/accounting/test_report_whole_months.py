"""The months a report reads from the monthly roll-up are those its days cover whole, to both
ends of the calendar (no "day after" December 31, 9999)."""

from __future__ import annotations

from calendar import monthrange
from datetime import date, timedelta

import pytest

from gpupool.accounting.reports import _whole_months


def covered_whole(start: date, end: date) -> list[date]:
    """The first days of the months every day of which is in ``start`` to ``end``, counted
    one month at a time with the calendar's month lengths."""
    found = []
    year, month = start.year, start.month
    while (year, month) <= (end.year, end.month):
        first = date(year, month, 1)
        last = date(year, month, monthrange(year, month)[1])
        if start <= first and last <= end:
            found.append(first)
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return found


CASES = [
    (date(2026, 3, 1), date(2026, 3, 31)),
    (date(2026, 3, 2), date(2026, 5, 30)),
    (date(2026, 2, 15), date(2026, 3, 14)),
    (date(2026, 1, 1), date(2026, 12, 31)),
    (date(9999, 12, 1), date(9999, 12, 31)),
    (date(9999, 12, 2), date(9999, 12, 31)),
    (date(9999, 11, 15), date(9999, 12, 31)),
    (date(9999, 12, 30), date(9999, 12, 31)),
    (date(1, 1, 1), date(1, 1, 30)),
    (date(1, 1, 1), date(1, 1, 31)),
    (date(1, 1, 2), date(1, 3, 31)),
]


@pytest.mark.parametrize(("start", "end"), CASES, ids=[f"{s}..{e}" for s, e in CASES])
def test_the_whole_months_are_the_months_covered_whole(start: date, end: date) -> None:
    found = _whole_months(start, end)
    want = covered_whole(start, end)
    if not want:
        assert found is None
        return
    assert found is not None
    first, last, last_day = found
    assert (first, last) == (want[0], want[-1])
    assert last_day.replace(day=1) == last and last_day <= end
    assert last_day == date.max or (last_day + timedelta(days=1)).day == 1
