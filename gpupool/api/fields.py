"""Serializer fields the API shares, and the one refusal of a value outside a field's choices.

Every choice field of the API (DRF's ``ChoiceField`` and ``MultipleChoiceField``, declared or
made by a model serializer from a model field's choices) refuses a value outside its choices
naming the values it takes (``"week" is not a valid choice: one of day, month.``), as a
choice filter does (``api.filters.choice_refusals``); DRF alone says only ``"week" is not a
valid choice.``. The API's choice fields are ``NamedChoiceField`` (declared, or made by a model
serializer through ``StrictInput.serializer_choice_field``); a field given its own
``invalid_choice`` message keeps it.
"""

from __future__ import annotations

import calendar
import re
from datetime import date
from typing import TYPE_CHECKING, Any, NoReturn, cast

from django.core.exceptions import ObjectDoesNotExist
from rest_framework import serializers

if TYPE_CHECKING:
    from django.db.models import QuerySet

DAY_SHAPE = re.compile(r"\d{4}-\d{2}-\d{2}")


class NameRelatedField(serializers.SlugRelatedField):  # type: ignore[type-arg]
    """An object named by one of its text fields (a flavor, queue or tenant by name).

    A NUL character is refused with the field's own error, as DRF's text fields refuse it:
    PostgreSQL cannot compare text holding one, and the lookup would fail as a server error.
    """

    default_error_messages = {
        "null_characters": "Null characters are not allowed.",
        "does_not_exist": "No {what} named {value}.",
    }

    def to_internal_value(self, data: Any) -> Any:
        """The object named ``data``; refuses a name holding a NUL character, and says what
        kind of object no such name was found among ("No priority class named nope.")."""
        if isinstance(data, str) and "\x00" in data:
            self.fail("null_characters")
        # A writable field has a queryset (DRF's ``RelatedField`` insists on one).
        queryset = cast("QuerySet[Any]", self.get_queryset())
        try:
            return queryset.get(**{self.slug_field: data})
        except ObjectDoesNotExist:
            self.fail("does_not_exist", what=queryset.model._meta.verbose_name, value=data)
        except (TypeError, ValueError):
            self.fail("invalid")


class StrictCharField(serializers.CharField):
    """Text that must be sent as a JSON string: DRF's ``CharField`` turns a number into its
    text (``1`` -> ``"1"``, ``2.5`` -> ``"2.5"``) while it refuses ``true``; here a number is
    refused as ``true`` is (a 400 naming the field: ``pod_sets.0.command.1``, ``env.A``)."""

    def to_internal_value(self, data: Any) -> str:
        """The text; anything that is not a string is refused ("Not a valid string.", DRF's
        refusal of ``true``)."""
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class CalendarDateField(serializers.DateField):
    """A day as ``YYYY-MM-DD``; one written right that is no day of the calendar
    (``2026-02-30``) is refused as such, not as "Date has wrong format" (DRF's words)."""

    default_error_messages = {"not_a_day": "{value} is not a real date: {why}."}

    def to_internal_value(self, value: Any) -> Any:
        """The day; a well-formed ``YYYY-MM-DD`` that names no day says which part is wrong."""
        if isinstance(value, str) and DAY_SHAPE.fullmatch(value.strip()):
            text = value.strip()
            year, month, day = (int(part) for part in text.split("-"))
            try:
                date(year, month, day)
            except ValueError:
                if not 1 <= year <= 9999:
                    why = "the year must be from 1 to 9999"
                elif not 1 <= month <= 12:
                    why = "the month must be from 01 to 12"
                else:
                    days = calendar.monthrange(year, month)[1]
                    why = f"{calendar.month_name[month]} {year} has {days} days"
                self.fail("not_a_day", value=text, why=why)
        return super().to_internal_value(value)


# DRF's own refusal of a value outside a choice field's choices, which names none of them.
DRF_INVALID_CHOICE = serializers.ChoiceField.default_error_messages["invalid_choice"]
INVALID_CHOICE = '"{input}" is not a valid choice: one of {choices}.'


def choice_refusal(field: serializers.ChoiceField, value: Any) -> str:
    """Why ``value`` is refused by ``field``: it is not one of the field's choices, each named
    as a client sends it (a group's choices each on their own)."""
    choices = ", ".join(field.choice_strings_to_values) or "none"
    return INVALID_CHOICE.format(input=value, choices=choices)


class _NamesItsChoices:
    """A choice field whose refusal of a value outside its choices names them
    (``choice_refusal``), unless the field was given a message of its own for it."""

    def fail(self, key: str, **kwargs: Any) -> NoReturn:
        field = cast("serializers.ChoiceField", self)
        if key == "invalid_choice" and field.error_messages.get(key) == DRF_INVALID_CHOICE:
            raise serializers.ValidationError(choice_refusal(field, kwargs.get("input")), code=key)
        super().fail(key, **kwargs)  # type: ignore[misc]
        raise AssertionError("unreachable: Field.fail raises")  # pragma: no cover


class NamedChoiceField(_NamesItsChoices, serializers.ChoiceField):
    """DRF's ``ChoiceField``, its refusal naming the choices: the API's choice field (declared
    ones, and those a model serializer makes from a model field's choices through
    ``StrictInput.serializer_choice_field``)."""


class NamedMultipleChoiceField(_NamesItsChoices, serializers.MultipleChoiceField):
    """DRF's ``MultipleChoiceField``, its refusal naming the choices."""
