"""Serializer fields the API shares."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class NameRelatedField(serializers.SlugRelatedField):  # type: ignore[type-arg]
    """An object named by one of its text fields (a flavor, queue or tenant by name).

    A NUL character is refused with the field's own error, as DRF's text fields refuse it:
    PostgreSQL cannot compare text holding one, and the lookup would fail as a server error.
    """

    default_error_messages = {
        "null_characters": "Null characters are not allowed.",
    }

    def to_internal_value(self, data: Any) -> Any:
        """The object named ``data``; refuses a name holding a NUL character."""
        if isinstance(data, str) and "\x00" in data:
            self.fail("null_characters")
        return super().to_internal_value(data)


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
