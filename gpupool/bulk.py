"""Bulk inserts for the actions that write many rows at once (recording a cycle, rolling
usage up, loading a seeded year): ``COPY ... FROM STDIN`` on PostgreSQL, which needs no SQL
text built or parsed per row, and batched ``bulk_create`` elsewhere (SQLite).

Only actions call these (tests/audit/test_writes_go_through_actions.py allows this module's
writes for that reason): a bulk insert is a step of an audited action, never an action itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.db.models import Field, JSONField, Model
from django.utils import timezone

# Rows per batched insert where there is no COPY (SQLite).
BATCH = 5000


def copy_rows(
    cursor: Any, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> int:
    """``COPY table (columns) FROM STDIN`` with ``rows`` on Django's PostgreSQL ``cursor``
    (``table`` quoted already); returns how many rows went in."""
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    count = 0
    with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
            count += 1
    return count


def as_json_text(value: Any) -> str:
    """A JSON field's value as the text COPY writes into it."""
    return json.dumps(value, cls=DjangoJSONEncoder)


def insert_objects(model: type[Model], objects: Sequence[Model]) -> int:
    """Insert many new model instances at once (ids are not read back); returns how many."""
    if not objects:
        return 0
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create(objects, batch_size=1000)
        return len(objects)
    fields: list[Any] = [f for f in model._meta.concrete_fields if not f.primary_key]
    # The attributes as they are (the driver adapts dates, decimals and numbers itself);
    # JSON as text. Django's per-value preparation cost more than the COPY itself.
    getters = [(f.attname, isinstance(f, JSONField)) for f in fields]
    rows = (
        tuple(
            as_json_text(getattr(obj, name)) if is_json else getattr(obj, name)
            for name, is_json in getters
        )
        for obj in objects
    )
    with connection.cursor() as cursor:
        copy_rows(
            cursor,
            connection.ops.quote_name(model._meta.db_table),
            [f.column for f in fields],
            rows,
        )
    return len(objects)


def insert_values(model: type[Model], columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Insert ``rows`` (tuples in ``columns`` order, columns by attname) without building a
    model instance per row on PostgreSQL; the model's other columns get their defaults (an
    ``auto_now`` or ``auto_now_add`` time is now, as Django's own inserts stamp it). ``rows``
    may be a generator: it is read once. Returns how many."""
    if connection.vendor != "postgresql":
        count = 0
        batch: list[Model] = []
        for row in rows:
            batch.append(model(**dict(zip(columns, row, strict=True))))
            if len(batch) >= BATCH:
                count += insert_objects(model, batch)
                batch = []
        return count + insert_objects(model, batch)
    meta = model._meta
    by_name: dict[str, Field[Any, Any]] = {f.attname: f for f in meta.concrete_fields}
    is_json = [isinstance(by_name[c], JSONField) for c in columns]
    extra, defaults = _other_columns(model, columns)
    fixed = [
        as_json_text(v) if isinstance(by_name[c], JSONField) else v
        for c, v in zip(extra, defaults, strict=True)
    ]
    with connection.cursor() as cursor:
        return copy_rows(
            cursor,
            connection.ops.quote_name(meta.db_table),
            [by_name[c].column for c in (*columns, *extra)],
            (
                [*(as_json_text(v) if j else v for v, j in zip(row, is_json, strict=True)), *fixed]
                for row in rows
            ),
        )


def _other_columns(model: type[Model], columns: Sequence[str]) -> tuple[list[str], list[Any]]:
    """The model's columns not in ``columns`` (but its key) and the value each gets."""
    extra: list[str] = []
    values: list[Any] = []
    now = timezone.now()
    for field in model._meta.concrete_fields:
        if field.attname in columns or field.primary_key:
            continue
        extra.append(field.attname)
        stamped = getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
        values.append(now if stamped else field.get_default())
    return extra, values
