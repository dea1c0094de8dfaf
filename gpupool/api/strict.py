"""Request bodies say only what the API takes: a key that names no field is refused.

DRF drops a key of a body that names no field of the serializer, so a misspelt field
(``priority_clas``) is lost without a word and the write goes through with the default (the
default priority class). Every serializer that reads a body is a ``StrictInput``: such a key
is a 400 naming it (``{"extra": ["Unknown field."]}``; inside a nested one, dotted:
``pod_sets.0.extra``), with the body's other errors, and nothing is written. An action that
takes no body (``POST quota-requests/<id>/submit/``) refuses one that says anything
(``refuse_a_body``).

A field the resource shows but does not take (read-only: ``created_at``, a queue's
``children``) is a field all the same: a row read can be sent back (``PUT``) and such fields
are ignored. ``tests/api/test_strict_input.py`` sends an unknown key to every write route of
the URL conf, so a new endpoint whose serializer is not strict fails it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rest_framework import serializers

from gpupool.api.fields import NamedChoiceField

# Keys of a body that are no field of any resource: Django's CSRF token, which the browsable
# API's HTML forms post with the fields.
NOT_FIELDS = frozenset({"csrfmiddlewaretoken"})
UNKNOWN = "Unknown field."


def unknown_keys(serializer: serializers.Serializer[Any], data: Any) -> dict[str, list[str]]:
    """The keys of ``data`` that name no field of ``serializer``, each with its error."""
    if not isinstance(data, Mapping):
        return {}  # not an object: the serializer's own error says so
    known = serializer.fields.keys()
    return {str(key): [UNKNOWN] for key in data if key not in known and key not in NOT_FIELDS}


class StrictInput:
    """Serializer mixin (first among the bases): a key of the body that names no field is a
    400 naming it, together with the body's other errors; a model field's choices become a
    field whose refusal names them (``NamedChoiceField``)."""

    # Read by ModelSerializer.build_standard_field for a model field with choices.
    serializer_choice_field: ClassVar[type[serializers.Field[Any, Any, Any, Any]]] = (
        NamedChoiceField
    )

    def to_internal_value(self, data: Any) -> Any:
        """The validated fields; a 400 naming every unknown key (and every failed field)."""
        unknown = unknown_keys(self, data)  # type: ignore[arg-type]
        try:
            value = super().to_internal_value(data)  # type: ignore[misc]
        except serializers.ValidationError as error:
            if unknown and isinstance(error.detail, dict):
                raise serializers.ValidationError({**error.detail, **unknown}) from None
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


class NoBodySerializer(StrictInput, serializers.Serializer[Any]):
    """The body of an action that takes nothing (``POST .../submit/``): none, or ``{}``."""


def refuse_a_body(data: Any) -> None:
    """For an action that takes no body: a 400 naming every key ``data`` has."""
    NoBodySerializer(data=data).is_valid(raise_exception=True)
