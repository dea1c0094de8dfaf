"""Accounting hours and days, counted in the pool's accounting time zone.

``GPUPOOL_ACCOUNTING_TZ`` (an IANA name, ``UTC`` by default) decides where a day and a month
begin. Hours are the zone's local hours, stored by their start in UTC: in a zone whose offset
is a whole number of hours they are UTC hours; in one such as Asia/Kolkata (+05:30) they start
at half past, so that every local day is made of whole hours. A daylight-saving day has 23 or
25 of them.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from django.conf import settings

HOUR = timedelta(hours=1)


@lru_cache(maxsize=8)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def accounting_zone() -> ZoneInfo:
    """The zone of the pool's accounting days and months (``GPUPOOL_ACCOUNTING_TZ``)."""
    return _zone(getattr(settings, "GPUPOOL_ACCOUNTING_TZ", "UTC") or "UTC")


def hour_start(at: datetime, zone: ZoneInfo) -> datetime:
    """The start (in UTC) of the accounting hour that holds ``at``."""
    local = at.astimezone(zone).replace(minute=0, second=0, microsecond=0)
    return local.astimezone(UTC)


def next_hour(start: datetime, zone: ZoneInfo) -> datetime:
    """The start of the accounting hour after the one that starts at ``start``."""
    later = hour_start(start + HOUR, zone)
    return later if later > start else start + HOUR


def hours(start: datetime, end: datetime, zone: ZoneInfo) -> list[datetime]:
    """Starts of the accounting hours from the one holding ``start`` up to ``end`` (excluded)."""
    found: list[datetime] = []
    hour = hour_start(start, zone)
    while hour < end:
        found.append(hour)
        hour = next_hour(hour, zone)
    return found


def local_day(at: datetime, zone: ZoneInfo) -> date:
    """The accounting day that holds ``at``."""
    return at.astimezone(zone).date()


def day_start(day: date, zone: ZoneInfo) -> datetime:
    """When the accounting day ``day`` begins, in UTC."""
    return hour_start(datetime.combine(day, time(0), tzinfo=zone), zone)


def day_end(day: date, zone: ZoneInfo) -> datetime:
    """When the accounting day ``day`` ends (the next one begins), in UTC."""
    return day_start(day + timedelta(days=1), zone)


def month_start(day: date) -> date:
    """The first day of the month that holds ``day``."""
    return day.replace(day=1)


def next_month(first: date) -> date:
    """The first day of the month after the one that starts on ``first``. December 9999 has
    none (the calendar ends with ``date.max``): OverflowError, saying so."""
    if (first.year, first.month) == (date.max.year, date.max.month):
        raise OverflowError(f"no month follows {first.isoformat()[:7]}: the calendar ends there")
    return (first.replace(day=28) + timedelta(days=4)).replace(day=1)
