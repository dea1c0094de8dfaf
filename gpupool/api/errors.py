"""One shape for every API error, and Django's own errors mapped onto DRF's.

Every error body is ``{"error": {"status": 400, "code": "invalid", "message": "...",
"fields": {"field": ["message", ...]}}}``; ``fields`` is there only when the request named
fields that failed, and a 400 always names them. Actions raise Django's ``ValidationError``
(with field names) and ``PermissionDenied``; they answer 400 and 403 like DRF's own.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, RequestDataTooBig, TooManyFieldsSent
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from django.http import Http404
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from gpupool.text_limits import TOO_LONG, TOO_MANY

NON_FIELD = "non_field_errors"
# Fields of an action's refusal whose sentence says what it is about itself ("nlp/x has already
# ended: it is cancelled. Nothing was changed.": a refusal of a step in the state its target is
# in): the error's ``message`` says it without the field's name, as it says the
# ``non_field_errors``; ``fields`` keeps the key. Only an action's (Django's ``ValidationError``):
# a filter or a body's field of that name ("?state=asleep") is named as any other. The pages'
# field words say it as nothing (``dashboard.forms.FIELD_WORDS``) and the CLI prints the
# message: one rule, here.
SELF_NAMING_FIELDS = frozenset({"state"})
# The code of a refusal whose sentence says what it is about itself, whatever field it is keyed
# by: an approval's "the change would not fit: guarantee: ...", keyed ``payload`` (which the
# admin deciding does not change). Said without the field's name as ``SELF_NAMING_FIELDS``
# are, by the API's message, the CLI and the pages (``self_naming_fields``); ``fields`` keeps
# the key. Raised as ``ValidationError({"payload": ValidationError(sentence,
# code=SELF_NAMING)})``.
SELF_NAMING = "self_naming"


def word_length_refusals() -> None:
    """Make ``TOO_LONG`` ("at most 400 characters, not 512") the refusal of a text past its
    length by every text field: the API's (DRF's ``CharField``, declared or made by a model
    serializer), the pages' forms' (Django's ``forms.CharField``) and the models' own (a
    ``full_clean``); each would else say Django's or DRF's words ("Ensure this field has no
    more than 400 characters."). And ``TOO_MANY`` ("at most 15 entries, not 16") the refusal of
    a list past its length by every list field of the API (DRF's ``ListField``: "Ensure this
    field has no more than 15 elements."). Their numbers from 1,000 up are written with
    separators (``text_limits.SizeRefusal``). A field given its own ``max_length`` message
    keeps it. Run once, as the apps load (``api.apps.ApiConfig.ready``)."""
    serializers.CharField.default_error_messages["max_length"] = TOO_LONG
    serializers.ListField.default_error_messages["max_length"] = TOO_MANY
    forms.CharField.default_error_messages = {
        **getattr(forms.CharField, "default_error_messages", {}),
        "max_length": TOO_LONG,
    }
    models.Field.default_error_messages["max_length"] = TOO_LONG


class BodyTooLarge(exceptions.APIException):
    """A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``: Django refuses to read it (413)."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


def body_too_large() -> BodyTooLarge:
    """The 413 for a body over the size the API reads, naming that size."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return BodyTooLarge(f"the body is larger than {limit:,} bytes, the most the API reads")


class ErrorBodySerializer(serializers.Serializer[Any]):
    """What went wrong: the HTTP status, a stable code and a message; on a 400, the fields."""

    status = serializers.IntegerField(help_text="The answer's HTTP status, again.")
    code = serializers.CharField(
        help_text="A stable word for the kind of error: invalid (400), not_authenticated or "
        "authentication_failed (401), permission_denied (403), not_found (404), ..."
    )
    message = serializers.CharField(help_text="What went wrong, for a person to read.")
    # (declared fields leave the class, so this "fields" does not hide Serializer.fields)
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Each field that failed (dotted into nested ones: pod_sets.0.count; "
        f"{NON_FIELD} for the request as a whole) with its messages. Always there on a 400.",
    )


class ErrorSerializer(serializers.Serializer[Any]):
    """The body of every error the API answers (``api_exception_handler``)."""

    error = ErrorBodySerializer()


def _messages(detail: Any) -> list[str]:
    if isinstance(detail, list | tuple):
        return [message for item in detail for message in _messages(item)]
    if isinstance(detail, dict):
        return [f"{key}: {m}" for key, value in detail.items() for m in _messages(value)]
    return [str(detail)]


def _fields(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """Flatten DRF's nested error detail into ``{"pod_sets.0.count": [...]}``."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict) or (
                isinstance(value, list) and any(isinstance(v, dict) for v in value)
            ):
                if isinstance(value, list):
                    for index, item in enumerate(value):
                        out |= _fields(item, f"{name}.{index}")
                else:
                    out |= _fields(value, name)
            else:
                out[name] = _messages(value)
    elif detail:
        out[prefix or NON_FIELD] = _messages(detail)
    return out


def django_validation_detail(error: DjangoValidationError) -> Any:
    """A Django ``ValidationError`` as DRF detail (a dict when it names fields); Django's
    own key for errors of no field (``__all__``, a model's ``clean`` or constraint) is DRF's
    ``non_field_errors``, as the API documents."""
    if hasattr(error, "error_dict"):
        return {
            NON_FIELD if field == NON_FIELD_ERRORS else field: [str(m) for m in errors]
            for field, errors in error.message_dict.items()
        }
    return {NON_FIELD: list(error.messages)}


def self_naming_fields(error: DjangoValidationError) -> frozenset[str]:
    """The fields of an action's refusal said without their names: ``SELF_NAMING_FIELDS``,
    and those whose every message carries the code ``SELF_NAMING``."""
    if not hasattr(error, "error_dict"):
        return frozenset()
    return frozenset(
        field
        for field, errors in error.error_dict.items()
        if field in SELF_NAMING_FIELDS or all(e.code == SELF_NAMING for e in errors)
    )


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, with Django's errors translated and every body in the one shape."""
    self_naming = frozenset[str]()
    if isinstance(exc, DjangoValidationError):
        self_naming = self_naming_fields(exc)
        exc = exceptions.ValidationError(django_validation_detail(exc))
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, RequestDataTooBig):  # else Django's HTML page naming settings
        exc = body_too_large()
    elif isinstance(exc, TooManyFieldsSent):
        exc = exceptions.ParseError(
            f"the body has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} form fields"
        )
    response = exception_handler(exc, context)
    if response is None:
        return None
    detail = response.data
    body: dict[str, Any] = {
        "status": response.status_code,
        "code": getattr(exc, "default_code", "error"),
    }
    if isinstance(exc, exceptions.ValidationError):
        fields = _fields(detail)
        body["code"] = "invalid"
        body["message"] = "; ".join(
            ", ".join(messages)
            if name == NON_FIELD or name in self_naming
            else f"{name}: {', '.join(messages)}"
            for name, messages in fields.items()
        )
        body["fields"] = fields
    else:
        message = detail.get("detail") if isinstance(detail, dict) else detail
        body["message"] = " ".join(_messages(message)) if message is not None else ""
        if isinstance(exc, exceptions.APIException) and isinstance(exc.detail, str):
            body["code"] = getattr(exc.detail, "code", body["code"])
    response.data = {"error": body}
    if response.status_code == status.HTTP_400_BAD_REQUEST and not body.get("fields"):
        body["fields"] = {NON_FIELD: [body.get("message", "")]}
    return response
