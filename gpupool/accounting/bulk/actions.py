"""Bulk writes: rows inserted many at a time (COPY on PostgreSQL, batched inserts elsewhere).

The roll-up inserts its hourly and daily rows through ``insert_rows``; the B5 generator loads a
seeded year through ``do_load_history``. Rows go in as given: the callers have validated them
(the roll-up computes them; the generator builds them within the models' rules), and the
database's constraints check them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection, models

BATCH = 5000


def _copy_value(value: Any) -> Any:
    """A value as COPY takes it (psycopg adapts the rest)."""
    if isinstance(value, dict | list):
        import json

        return json.dumps(value)
    return value


def insert_rows(
    model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> int:
    """Insert ``rows`` (tuples in ``columns`` order, columns by attname) into ``model``'s table;
    returns how many. COPY on PostgreSQL; ``bulk_create`` in batches elsewhere."""
    count = 0
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(model._meta.db_table)
        names = ", ".join(connection.ops.quote_name(column) for column in columns)
        with connection.cursor() as cursor:
            raw = cursor.cursor  # psycopg 3's cursor, under Django's wrapper
            with raw.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row([_copy_value(value) for value in row])
                    count += 1
        return count
    batch: list[models.Model] = []
    for row in rows:
        batch.append(model(**dict(zip(columns, row, strict=True))))
        if len(batch) >= BATCH:
            model._default_manager.bulk_create(batch)
            count += len(batch)
            batch = []
    if batch:
        model._default_manager.bulk_create(batch)
        count += len(batch)
    return count
