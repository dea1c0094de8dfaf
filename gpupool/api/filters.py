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

A filter by the name of a thing the pool keeps (``NameFilter``: ``tenant``, ``queue``,
``flavor``, ``priority_class``, a user as ``submitter``, ``user`` or ``requested_by``) refuses
a name that names nothing with a 400 naming the filter, in the words a body gets for the same
name (``NameRelatedField``: "No tenant named nosuch."), every unknown name at once
(``unknown_names``): an empty list would read as "nothing there". ``NamesFilter`` takes several
such names as the choice filters take several values, the parameter repeated
(``tenant=nlp&tenant=vision``: the rows of any of them), and refuses each unknown one the
same way. These names are not secret
from anyone who may read the list (tenants, queues, flavors and classes are readable to every
role, and a user is named to add a member), so the check is against every row, not the
caller's. A name that is data without a table of its own (a workload's ``namespace``, an
audit event's ``actor`` as it was at the change) stays a plain filter.

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
from django.apps import apps
from django.db.models import Model
from django.utils.dateparse import parse_datetime
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField
from rest_framework.exceptions import ValidationError
from rest_framework.filters import OrderingFilter
from rest_framework.request import Request

from gpupool.api.fields import NameRelatedField

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
        if isinstance(each, NamedRows):
            continue  # names, not a vocabulary: ``unknown_names`` checks them
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


class NamedRows:
    """What a filter by names of ``names`` rows (a model, or ``"app_label.Model"`` such as
    ``settings.AUTH_USER_MODEL``), found by their ``name_field``, knows of them: which model,
    and whether a name names one (``unknown``); ``besides``: values the filter reads as words
    of its own, not names (``parent=null``: the root). ``NameFilter`` takes one name,
    ``NamesFilter`` several."""

    # What the schema says the filter takes, of the model it names ("A tenant's name ...").
    help_template = "A {what}'s {name_field} (exact); one that names no {what} is a 400."

    def __init__(
        self,
        *args: Any,
        names: type[Model] | str,
        name_field: str = "name",
        besides: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> None:
        # A user model is named by its class name.
        if isinstance(names, str):
            what = names.rpartition(".")[2].lower()
        else:
            what = str(names._meta.verbose_name)
        kwargs.setdefault("help_text", self.help_template.format(what=what, name_field=name_field))
        super().__init__(*args, **kwargs)
        self.names = names
        self.name_field = name_field
        self.besides = besides

    def named_model(self) -> type[Model]:
        """The model whose rows the filter names."""
        if isinstance(self.names, str):
            return apps.get_model(self.names)
        return self.names

    def unknown(self, value: str) -> str | None:
        """Why ``value`` names nothing ("No tenant named nosuch."), or None when it names a
        row (or is one of the filter's own words)."""
        if value in self.besides:
            return None
        model = self.named_model()
        if model._default_manager.filter(**{self.name_field: value}).exists():
            return None
        said = NameRelatedField.default_error_messages["does_not_exist"]
        return said.format(what=model._meta.verbose_name, value=value)


class NameFilter(NamedRows, filters.CharFilter):  # type: ignore[misc]
    """A filter by the name of a row (``NamedRows``). It filters as a ``CharFilter`` does (or
    through its ``method``); ``StrictFilterBackend`` refuses a name that names nothing
    (``unknown_names``)."""


class NamesField(forms.MultipleChoiceField):
    """Several names, the parameter repeated (as a ``MultipleChoiceFilter``'s values): any
    text, stripped, blanks dropped; a NUL character is refused, as in any text field. Whether
    each names a row is ``StrictFilterBackend``'s to check (``unknown_names``)."""

    def to_python(self, value: Any) -> list[str]:
        """The names given, stripped, without blanks."""
        return [name.strip() for name in super().to_python(value) if name.strip()]

    def validate(self, value: Any) -> None:
        """Refuse a name holding a NUL character (any name is otherwise a valid choice)."""
        if any("\x00" in name for name in value):
            raise forms.ValidationError("Null characters are not allowed.")

    def valid_value(self, value: Any) -> bool:
        """Every name is one the field takes."""
        return True


class NamesFilter(NamedRows, filters.MultipleChoiceFilter):  # type: ignore[misc]
    """A filter by several names of rows (``NamedRows``), the parameter repeated as the choice
    filters' (``tenant=nlp&tenant=vision``: the rows of any of them; the schema says so as it
    says theirs: an array, exploded); ``StrictFilterBackend`` refuses every name that names
    nothing (``unknown_names``)."""

    field_class = NamesField
    help_template = (
        "A {what}'s {name_field} (exact), repeated for several (the rows of any of them); one "
        "that names no {what} is a 400."
    )

    def filter(self, queryset: Any, value: list[str]) -> Any:
        """The rows of any of the names (every row when none is given)."""
        if not value:
            return queryset
        return self.get_method(queryset)(**{f"{self.field_name}__in": value})


def unknown_names(filterset: Any) -> dict[str, list[str]]:
    """Each name filter (``NameFilter``, ``NamesFilter``) of ``filterset`` whose value (or any
    of its values) names nothing, with a refusal for each such name (a value the filter's form
    refused itself, such as one holding a NUL character, is the form's to report)."""
    if not filterset.is_bound:
        return {}
    form = filterset.form
    form.is_valid()  # (cleans the form once; the backend reads its errors after this)
    cleaned = getattr(form, "cleaned_data", {})
    refused: dict[str, list[str]] = {}
    for name, each in filterset.filters.items():
        value = cleaned.get(name)
        if not isinstance(each, NamedRows) or not value:
            continue
        values = value if isinstance(value, list) else [value]
        whys = [why for one in values if (why := each.unknown(one)) is not None]
        if whys:
            refused[name] = whys
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
    the parameter) instead of leaving the list unfiltered, a choice filter's value outside
    its vocabulary with a 400 naming the values it takes, and a name that names nothing
    ("No tenant named nosuch.")."""

    def get_filterset(self, request: Request, queryset: Any, view: Any) -> Any:
        """The list's filter set, once its boolean parameters are known to be readable, its
        choices among their words and its names among the pool's."""
        filterset = super().get_filterset(request, queryset, view)
        if filterset is not None:
            unreadable: dict[str, str | list[str]] = {
                name: f"{raw!r} is not a boolean: true or false (or 1 or 0)"
                for name, each in filterset.filters.items()
                if isinstance(each, filters.BooleanFilter)
                and (raw := request.query_params.get(name, "")).strip()
                and raw.strip().lower() not in BOOLEAN_WORDS
            }
            unreadable |= choice_refusals(filterset, request.query_params)
            unreadable |= unknown_names(filterset)
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
