"""``bulk.insert_values`` writes what Django's own insert writes: JSON columns as JSON (one
shared encoder), the model's other columns their defaults; a row of the wrong width is refused
and nothing of the call is written."""

from __future__ import annotations

import datetime
import json
import uuid
from decimal import Decimal

import pytest
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction

from gpupool.audit.models import AuditEvent
from gpupool.bulk import as_json_text, insert_values

pytestmark = pytest.mark.django_db

AT = datetime.datetime(2026, 12, 2, 18, 0, tzinfo=datetime.UTC)
VALUES = [
    None,
    [0, 1, 2, 3],
    {"gpus": 8, "asked": Decimal("1.5"), "at": AT, "id": uuid.UUID(int=7), "nested": {"a": [1]}},
    "text",
    {},
]
# What a JSONField without an encoder of its own takes (Django's insert, for comparison).
PLAIN = [None, [0, 1, 2, 3], {"gpus": 8, "nested": {"a": [1]}}, "text", {}]


@pytest.mark.parametrize("value", VALUES)
def test_json_text_is_json_dumps_with_django_s_encoder(value: object) -> None:
    assert as_json_text(value) == json.dumps(value, cls=DjangoJSONEncoder)


def _stored(action: str) -> list[tuple[object, ...]]:
    return list(
        AuditEvent.objects.filter(action=action)
        .order_by("object_id")
        .values_list("object_id", "at", "before", "after", "reason", "actor_name")
    )


def test_rows_with_json_columns_and_without_are_stored_as_django_stores_them() -> None:
    for index, value in enumerate(PLAIN):
        AuditEvent.objects.create(
            action="django", object_type="t", object_id=str(index), object_repr="r", at=AT,
            before=value, after={"i": index}, reason="why",
        )  # fmt: skip
    with_json = insert_values(
        AuditEvent,
        ("action", "object_type", "object_id", "object_repr", "at", "before", "after", "reason"),
        [("bulk", "t", str(i), "r", AT, v, {"i": i}, "why") for i, v in enumerate(PLAIN)],
    )
    assert with_json == len(PLAIN)
    assert _stored("bulk") == _stored("django")
    # No JSON column given: the rows go in as they are, the others take their defaults.
    plain = insert_values(
        AuditEvent,
        ("action", "object_type", "object_id", "object_repr", "at", "reason"),
        (("plain", "t", str(i), "r", AT, "why") for i in range(3)),
    )
    assert plain == 3
    assert _stored("plain") == [(str(i), AT, None, None, "why", "") for i in range(3)]


@pytest.mark.parametrize("json_column", [True, False], ids=["with JSON", "without JSON"])
def test_a_row_of_the_wrong_width_is_refused_and_nothing_is_written(json_column: bool) -> None:
    columns = ("action", "object_type", "object_id", "object_repr", "at", "reason")
    good = ("short", "t", "1", "r", AT, "why")
    short = ("short", "t", "2", "r", AT)
    if json_column:
        columns, good, short = (*columns, "after"), (*good, {"a": 1}), (*short, "why")
    with pytest.raises(ValueError, match="a row of"), transaction.atomic():
        insert_values(AuditEvent, columns, [good, short])
    assert not AuditEvent.objects.filter(action="short").exists()
