"""Filters shared by the API's lists.

Every list filters through ``StrictFilterBackend`` and sorts through ``StrictOrderingFilter``:
a query value the list cannot read is a 400 naming the parameter, never a list that looks
filtered and is not (django-filter reads ``?leaf=maybe`` as no filter at all, DRF drops an
unknown ``?ordering=`` field).

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
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request

# What django-filter's boolean widget reads (any case); anything else it takes as "no filter".
BOOLEAN_WORDS = frozenset({"true", "false", "1", "0"})


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


class StrictFilterBackend(filters.DjangoFilterBackend):  # type: ignore[misc]
    """django-filter's backend, refusing a boolean filter's value it cannot read (400 naming
    the parameter) instead of leaving the list unfiltered."""

    def get_filterset(self, request: Request, queryset: Any, view: Any) -> Any:
        """The list's filter set, once its boolean parameters are known to be readable."""
        filterset = super().get_filterset(request, queryset, view)
        if filterset is not None:
            unreadable = {
                name: f"{raw!r} is not a boolean: true or false (or 1 or 0)"
                for name, each in filterset.filters.items()
                if isinstance(each, filters.BooleanFilter)
                and (raw := request.query_params.get(name, "")).strip()
                and raw.strip().lower() not in BOOLEAN_WORDS
            }
            if unreadable:
                raise ValidationError(unreadable)
        return filterset


class StrictOrderingFilter(OrderingFilter):
    """``?ordering=`` (comma-separated, ``-`` for descending): a field the list does not sort
    by is a 400 naming ``ordering`` and the fields it does."""

    def get_ordering(self, request: Request, queryset: Any, view: Any) -> Any:
        """The ordering asked, once every field of it is one the list sorts by."""
        asked = request.query_params.get(self.ordering_param, "")
        terms = [term.strip() for term in asked.split(",") if term.strip()]
        if terms:
            valid = {
                field for field, _ in self.get_valid_fields(queryset, view, {"request": request})
            }
            unknown = [term for term in terms if term.removeprefix("-") not in valid]
            if unknown:
                raise ValidationError(
                    {
                        self.ordering_param: f"cannot sort by {', '.join(unknown)}; "
                        f"it sorts by {', '.join(sorted(valid)) or 'nothing'}"
                    }
                )
        return super().get_ordering(request, queryset, view)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        """``ordering`` as DRF documents it, naming the fields the list sorts by (where the
        view lists them: ``ordering_fields``)."""
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        fields = getattr(view, "ordering_fields", None)
        if isinstance(fields, list | tuple) and fields:
            names = ", ".join(field if isinstance(field, str) else field[0] for field in fields)
            for parameter in parameters:
                parameter["description"] = (
                    f"Sort by {names} (comma-separated; '-' first for descending); "
                    "any other field is a 400 naming ordering."
                )
        return parameters
