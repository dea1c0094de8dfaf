"""Filters shared by the API's lists.

``UtcDateTimeFilter`` takes an ISO 8601 time with any UTC offset and compares in UTC: the
database need not accept the offset itself (PostgreSQL refuses offsets beyond 15:59), and a
time that does not exist in UTC (year 1 minus a few hours) is a 400 naming the parameter.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import forms
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField


class UtcDateTimeField(IsoDateTimeField):  # type: ignore[misc]
    """An ISO 8601 time, converted to UTC."""

    def to_python(self, value: Any) -> datetime | None:
        """The time in UTC; a time outside UTC's calendar is invalid."""
        moment = super().to_python(value)
        if not isinstance(moment, datetime):
            return None
        try:
            return moment.astimezone(UTC)
        except (OverflowError, ValueError):
            raise forms.ValidationError("a time between the years 1 and 9999 in UTC") from None


class UtcDateTimeFilter(filters.IsoDateTimeFilter):  # type: ignore[misc]
    """Filter on a time given in ISO 8601 with any offset, compared in UTC."""

    field_class = UtcDateTimeField
