"""Rows of a list rendered without DRF's per-field detours, to the same bytes.

DRF renders a row by asking each field for its attribute (``Field.get_attribute``: a walk over
``source_attrs`` that checks every step for a mapping and for a callable) and then for its
representation (a slug field builds an ``attrgetter`` per call, a time field looks up the
current time zone per call). Over a page of 100 rows of 15 fields that was most of a list's
CPU on B5's year (docs/benchmarks.md, B5). ``PlannedRows`` plans a serializer once: per field,
a getter (an ``operator.attrgetter`` of its dotted source) and a converter (what the field's
own ``to_representation`` does, for the plain kinds; the field's method for the rest). A row
where a getter fails (a null on the way) or meets something the plan does not know takes
DRF's own path for that field, so the output is DRF's.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from datetime import datetime, tzinfo
from decimal import Decimal
from operator import attrgetter
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from rest_framework import ISO_8601, serializers
from rest_framework.fields import SkipField
from rest_framework.relations import PKOnlyObject
from rest_framework.settings import api_settings

AnyField = serializers.Field[Any, Any, Any, Any]
# How a step reads its value: the whole row to a method, an attribute path, DRF's own path.
METHOD, PATH, DRF = 0, 1, 2
# (name, how, getter, converter, the field for DRF's own path)
Step = tuple[str, int, Callable[[Any], Any], Callable[[Any], Any], AnyField]


def _iso_time(zone: tzinfo) -> Callable[[Any], Any]:
    """``DateTimeField.to_representation`` for ISO 8601 in ``zone``, for aware times."""

    def convert(value: Any) -> Any:
        if not isinstance(value, datetime) or value.tzinfo is None:
            raise TypeError  # DRF's own path: naive times, strings
        text = value.astimezone(zone).isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text

    return convert


def _decimal(field: serializers.DecimalField) -> Callable[[Any], Any]:
    """``DecimalField.to_representation`` with its exponent and context made once (DRF
    copies the context per value); DRF's own for anything but a string of a Decimal."""
    coerce = getattr(field, "coerce_to_string", api_settings.COERCE_DECIMAL_TO_STRING)
    if not coerce or field.localize or field.normalize_output or field.decimal_places is None:
        return field.to_representation
    exponent = Decimal(1).scaleb(-field.decimal_places)
    context = decimal.getcontext().copy()
    if field.max_digits is not None:
        context.prec = field.max_digits
    rounding = field.rounding

    def convert(value: Any) -> Any:
        if not isinstance(value, Decimal):
            raise TypeError  # DRF's own path: ints, floats, strings
        return f"{value.quantize(exponent, rounding=rounding, context=context):f}"

    return convert


def _converter(field: AnyField) -> Callable[[Any], Any]:
    """What ``field.to_representation`` does to a value that is not None, as cheaply as the
    field's kind allows (the field's own method where no shortcut is exact)."""
    kind = type(field)
    if kind in (serializers.CharField, serializers.EmailField, serializers.SlugField):
        return str
    if kind is serializers.IntegerField:
        return int
    if isinstance(field, serializers.DateTimeField) and type(field).to_representation is (
        serializers.DateTimeField.to_representation
    ):
        output = getattr(field, "format", api_settings.DATETIME_FORMAT)
        zone = field.timezone if hasattr(field, "timezone") else field.default_timezone()
        if isinstance(output, str) and output.lower() == ISO_8601 and isinstance(zone, tzinfo):
            return _iso_time(zone)
    if type(field) is serializers.DecimalField:
        return _decimal(field)
    if isinstance(field, serializers.SlugRelatedField) and type(field).to_representation is (
        serializers.SlugRelatedField.to_representation
    ):
        return attrgetter(field.slug_field.replace("__", "."))
    return field.to_representation


def _plain_source(field: AnyField) -> bool:
    """Whether the field reads an attribute path (not the whole row, not a to-many
    relation, not a primary-key stand-in) that an ``attrgetter`` reads the same."""
    if field.source == "*" or not field.source_attrs:
        return False
    if isinstance(field, serializers.ManyRelatedField | serializers.ListSerializer):
        return False
    if isinstance(field, serializers.RelatedField) and field.use_pk_only_optimization():
        return False
    return isinstance(
        field,
        serializers.CharField
        | serializers.IntegerField
        | serializers.BooleanField
        | serializers.DecimalField
        | serializers.FloatField
        | serializers.DateTimeField
        | serializers.DateField
        | serializers.ChoiceField
        | serializers.SlugRelatedField,
    )


def plan(serializer: serializers.Serializer[Any]) -> list[Step]:
    """The steps that render one row of ``serializer``."""
    steps: list[Step] = []
    for field in serializer._readable_fields:
        name = field.field_name
        assert name is not None
        if isinstance(field, serializers.SerializerMethodField):
            method = getattr(serializer, field.method_name)
            steps.append((name, METHOD, method, method, field))
        elif _plain_source(field):
            getter = attrgetter(".".join(field.source_attrs))
            steps.append((name, PATH, getter, _converter(field), field))
        else:
            steps.append((name, DRF, field.get_attribute, field.to_representation, field))
    return steps


def _by_drf(field: AnyField, instance: Any) -> Any:
    """One field of one row the way DRF renders it; raises ``SkipField`` to leave it out."""
    attribute = field.get_attribute(instance)
    check = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
    return None if check is None else field.to_representation(attribute)


def render(steps: list[Step], instance: Any) -> dict[str, Any]:
    """One row: each step's value, None for a null; DRF's path where a step cannot say."""
    row: dict[str, Any] = {}
    for name, how, getter, convert, field in steps:
        if how == METHOD:
            row[name] = convert(instance)
            continue
        try:
            if how == DRF:
                row[name] = _by_drf(field, instance)
                continue
            try:
                value = getter(instance)
                if value is None:
                    row[name] = None
                elif callable(value):
                    raise TypeError  # a method as source: DRF calls it
                else:
                    row[name] = convert(value)
            except (AttributeError, ObjectDoesNotExist, TypeError):
                row[name] = _by_drf(field, instance)
        except SkipField:
            continue
    return row


class PlannedRows:
    """Serializer mixin: ``to_representation`` by the serializer's plan, made on first use
    (one serializer renders every row of a list: DRF's ``many=True`` child)."""

    _steps: list[Step] | None = None

    def to_representation(self, instance: Any) -> dict[str, Any]:
        """The row, as DRF's ``Serializer.to_representation`` renders it."""
        steps = self._steps
        if steps is None:
            steps = self._steps = plan(self)  # type: ignore[arg-type]
        return render(steps, instance)
