"""Filters shared by the API's lists.

Every list filters through ``StrictFilterBackend`` and sorts through ``StrictOrderingFilter``:
a query value the list cannot read is a 400 naming the parameter, never a list that looks
filtered and is not (django-filter reads ``?leaf=maybe`` as no filter at all, DRF drops an
unknown ``?ordering=`` field).

A filter over a fixed vocabulary (django-filter's ``ChoiceFilter`` and
``MultipleChoiceFilter``: ``state``, ``reason``, ``kind``, ``status``, a model field with
choices such as ``sharing`` or ``role``) refuses a value outside it with a 400 naming the
parameter and listing the values it takes (``choice_refusals``), as ``window``, ``ordering``
and the booleans do; django-filter alone says only "Select a valid choice".

``UtcDateTimeFilter`` takes an ISO 8601 time with a UTC offset (``Z``, ``+02:00``) and compares
in UTC: the database need not accept the offset itself (PostgreSQL refuses offsets beyond
15:59), and a time that does not exist in UTC (year 1 minus a few hours) is a 400 naming the
parameter. A time without a zone is a 400 too (``NEEDS_A_ZONE``), as ``manage.py gpupool
snapshot --at`` refuses it: read in the server's zone it would silently mean another moment.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import forms
from django.utils.dateparse import parse_datetime
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request

# What django-filter's boolean widget reads (any case); anything else it takes as "no filter".
BOOLEAN_WORDS = frozenset({"true", "false", "1", "0"})
NEEDS_A_ZONE = "needs a time zone: an ISO 8601 time such as 2026-12-01T10:00:00Z or +02:00"


def accepted_choices(filter_: Any) -> list[str]:
    """The values a choice filter takes, as the query writes them (grouped choices flattened;
    django-filter's empty choice left out)."""
    choices = filter_.extra.get("choices", ())
    if callable(choices):
        choices = choices()
    values: list[str] = []
    for value, label in choices:
        if isinstance(label, list | tuple):  # a group: (name, [(value, label), ...])
            values += [str(each) for each, _ in label]
        elif value not in ("", None):
            values.append(str(value))
    return values


def choice_refusals(filterset: Any, query: Any) -> dict[str, str]:
    """Each choice filter of ``filterset`` whose value in ``query`` is outside its vocabulary,
    with a message naming the values it takes (a repeated parameter: every value checked)."""
    refused: dict[str, str] = {}
    for name, each in filterset.filters.items():
        if not isinstance(each, filters.ChoiceFilter | filters.MultipleChoiceFilter):
            continue
        asked = [raw for raw in query.getlist(name) if raw != ""]
        if not asked:
            continue
        accepted = accepted_choices(each)
        wrong = [raw for raw in asked if raw not in accepted]
        if wrong:
            several = (
                " (repeat it for several)" if isinstance(each, filters.MultipleChoiceFilter) else ""
            )
            refused[name] = (
                f"{', '.join(repr(raw) for raw in wrong)} "
                f"{'is not a' if len(wrong) == 1 else 'are not'} {name}: one of "
                f"{', '.join(accepted)}{several}"
            )
    return refused


class UtcDateTimeField(IsoDateTimeField):  # type: ignore[misc]
    """An ISO 8601 time, converted to UTC."""

    def to_python(self, value: Any) -> datetime | None:
        """The time in UTC; a time without a zone, or outside UTC's calendar, is invalid."""
        if isinstance(value, str) and value.strip():
            try:
                parsed = parse_datetime(value.strip())
            except ValueError:
                parsed = None  # (not a real time: Django's own message says so)
            if parsed is not None and parsed.tzinfo is None:
                raise forms.ValidationError(f"{value.strip()} {NEEDS_A_ZONE}")
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
    the parameter) instead of leaving the list unfiltered, and a choice filter's value outside
    its vocabulary with a 400 naming the values it takes."""

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
            unreadable |= choice_refusals(filterset, request.query_params)
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
