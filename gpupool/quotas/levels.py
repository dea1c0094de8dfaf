"""The order of a queue quota's three levels, guarantee <= deserved <= capability: the one rule
that a quota (``models.QueueQuota.clean``), a quota request (``models.QuotaRequest.clean``), the
Requests page's form and the command-line client check, each naming the levels in its own
words. Every pair out of order is said at once, keyed by its lower level. Stdlib only: the
client imports it without Django."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal
from itertools import pairwise
from typing import NamedTuple

# A queue quota's levels, lowest first: each must not exceed the next.
QUOTA_LEVELS = ("guarantee", "deserved", "capability")


class LevelOutOfOrder(NamedTuple):
    """A level above the next one up: ``low`` exceeds ``high``, as ``message`` says."""

    low: str
    high: str
    message: str


def _amount(value: Decimal | int | str) -> str:
    return format(Decimal(value).normalize(), "f")


def levels_out_of_order(
    levels: Mapping[str, Decimal | int | str | None], words: Callable[[str], str] = str
) -> list[LevelOutOfOrder]:
    """Each level of ``levels`` above the next one up, lowest first, its message naming the
    two levels in ``words`` (their keys unless told): ``guarantee (10) must not exceed deserved
    (5)``. A pair with a level missing (None, or not given) is not checked: the missing one has
    its own error."""
    found = []
    for low, high in pairwise(QUOTA_LEVELS):
        below, above = levels.get(low), levels.get(high)
        if below is None or above is None or Decimal(below) <= Decimal(above):
            continue
        message = (
            f"{words(low)} ({_amount(below)}) must not exceed {words(high)} ({_amount(above)})"
        )
        found.append(LevelOutOfOrder(low, high, message))
    return found
