"""Bulk writes for the actions that write many rows at once (recording a cycle, rolling
usage up, loading a seeded year, recording utilisation): ``COPY ... FROM STDIN`` on
PostgreSQL, which needs no SQL text built or parsed per row, and batched ``bulk_create``
elsewhere (SQLite); and many rows updated each to its own values (``update_rows``).

Only actions call these (tests/audit/test_writes_go_through_actions.py allows this module's
writes for that reason): a bulk insert is a step of an audited action, never an action itself.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.db.models import (
    BooleanField,
    CharField,
    DateTimeField,
    Field,
    ForeignKey,
    IntegerField,
    JSONField,
    Model,
    QuerySet,
    TextField,
)
from django.db.models.expressions import RawSQL
from django.utils import timezone

# Rows per batched insert where there is no COPY (SQLite).
BATCH = 5000


@contextmanager
def overlapped() -> Iterator[None]:
    """Let the server execute the statements sent in the block while the block's Python goes
    on (PostgreSQL: psycopg's pipeline mode, left -- and waited for -- where the block ends);
    elsewhere an ordinary block. The block must not read a statement's result (a fetch waits
    for the server first), nor ``COPY`` (not allowed in a pipeline). An error of a statement
    sent in the block is raised where the block ends, as Django's error (``DatabaseError``
    and its kin), and the transaction is then aborted as after any failed statement."""
    if connection.vendor != "postgresql":
        yield
        return
    connection.ensure_connection()
    with connection.wrap_database_errors, connection.connection.pipeline():
        yield


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def values_timed(queryset: QuerySet[Any], *fields: str) -> list[tuple[Any, ...]]:
    """``queryset.values_list(*fields)``, its model's own date-time fields read as whole
    microseconds since the epoch on PostgreSQL and made aware times (UTC) here: exactly the
    stored moments, without Django's ``timestamptz`` loader, which parses each value's text
    in Python (about a tenth of a steady sync's transaction at B1-loop's size, seven times
    per row). Elsewhere the ordinary ``values_list``."""
    if connection.vendor != "postgresql":
        return list(queryset.values_list(*fields))
    meta = queryset.model._meta
    table = connection.ops.quote_name(meta.db_table)
    timed: list[int] = []
    columns: list[Any] = []
    for index, name in enumerate(fields):
        field = None if "__" in name else meta.get_field(name)
        if isinstance(field, DateTimeField):
            timed.append(index)
            column = connection.ops.quote_name(field.column)
            sql = f"(extract(epoch from {table}.{column}) * 1000000)::bigint"  # names quoted
            columns.append(RawSQL(sql, ()))  # noqa: S611
        else:
            columns.append(name)
    if not timed:
        return list(queryset.values_list(*fields))
    names = {f"_timed_{i}": columns[i] for i in timed}
    rows = queryset.annotate(**names).values_list(
        *(f"_timed_{i}" if i in timed else name for i, name in enumerate(fields))
    )
    epoch, step = _EPOCH, timedelta
    out: list[tuple[Any, ...]] = []
    for row in rows:
        values = list(row)
        for i in timed:
            value = values[i]
            if value is not None:
                values[i] = epoch + step(microseconds=value)
        out.append(tuple(values))
    return out


def check_constraints_now() -> None:
    """Check the foreign keys deferred so far now (``SET CONSTRAINTS ALL IMMEDIATE``, then
    ``DEFERRED`` again: the rows written later are checked at the commit, as before). On
    PostgreSQL only (SQLite's checks are immediate). Django declares every foreign key
    DEFERRABLE INITIALLY DEFERRED and nothing else deferrable, so deferring them all again
    restores the default."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def check_deferred_constraints() -> None:
    """Check the foreign keys deferred until COMMIT now, when this transaction is nested in
    another (its end is a savepoint's release, which checks nothing): an action that writes
    many rows then pays for, and fails on, its checks where it ends, as it does when it
    commits -- as in a benchmark run that is rolled back, whose time would otherwise leave
    out what a commit costs. A no-op outside an outer transaction and on SQLite (whose
    checks are immediate). Django declares every foreign key DEFERRABLE INITIALLY DEFERRED
    and nothing else deferrable, so deferring them all again restores the default."""
    if connection.savepoint_ids:
        check_constraints_now()


def analyze(*models: type[Model]) -> None:
    """Have PostgreSQL sample the tables of ``models`` now (``ANALYZE``), after they were
    filled in bulk: until autovacuum's next round comes to them (a minute or more), the
    planner prices them by statistics from before -- none, for a table filled from empty --
    and picks plans for a handful of rows (B1-loop: a refresh by 150 ids hashed the 30,000
    live workloads, 30 ms where it takes 12). Inside a transaction it counts that
    transaction's own rows, and its statistics commit or roll back with it. Elsewhere a
    no-op."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for model in models:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")


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


# One encoder for every value: ``json.dumps(value, cls=DjangoJSONEncoder)`` makes a new one
# per call (about half of its cost for a short list, such as a placement's GPU indices).
_JSON_ENCODER = DjangoJSONEncoder()


def as_json_text(value: Any) -> str:
    """A JSON field's value as the text COPY writes into it."""
    return _JSON_ENCODER.encode(value)


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
            _check_width(row, len(columns))
            batch.append(model(**dict(zip(columns, row, strict=True))))
            if len(batch) >= BATCH:
                count += insert_objects(model, batch)
                batch = []
        return count + insert_objects(model, batch)
    meta = model._meta
    by_name: dict[str, Field[Any, Any]] = {f.attname: f for f in meta.concrete_fields}
    json_at = tuple(i for i, c in enumerate(columns) if isinstance(by_name[c], JSONField))
    extra, defaults = _other_columns(model, columns)
    fixed = tuple(
        as_json_text(v) if isinstance(by_name[c], JSONField) else v
        for c, v in zip(extra, defaults, strict=True)
    )
    with connection.cursor() as cursor:
        return copy_rows(
            cursor,
            connection.ops.quote_name(meta.db_table),
            [by_name[c].column for c in (*columns, *extra)],
            (_copy_row(row, len(columns), json_at, fixed) for row in rows),
        )


def _copy_row(
    row: Sequence[Any], width: int, json_at: tuple[int, ...], fixed: tuple[Any, ...]
) -> Sequence[Any]:
    """A row of ``insert_values`` as COPY takes it: its JSON columns (positions ``json_at``) as
    text, then the model's other columns' values (``fixed``). Most rows have no JSON column
    and are copied as they are, not value by value."""
    _check_width(row, width)
    if not json_at:
        return (*row, *fixed)
    values = [*row, *fixed]
    for position in json_at:
        values[position] = as_json_text(values[position])
    return values


def _check_width(row: Sequence[Any], width: int) -> None:
    """Refuse a row of ``insert_values`` whose values do not match its columns."""
    if len(row) != width:
        raise ValueError(f"a row of {len(row)} values for {width} columns: {row!r}"[:300])


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


def _plain(value: Any) -> Any:
    """A value as COPY writes it: JSON adapted to text, the rest as the driver adapts it."""
    inner = getattr(value, "obj", None)
    if inner is not None and type(value).__name__ in ("Jsonb", "Json"):
        return json.dumps(inner, cls=DjangoJSONEncoder)
    return value


def _aware(value: Any) -> bool:
    return value is None or (isinstance(value, datetime) and value.tzinfo is not None)


def _text(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _flag(value: Any) -> bool:
    return value is None or type(value) is bool


def _number(value: Any) -> bool:
    return value is None or type(value) is int


def _preparer(field: Any) -> Callable[[Any], Any]:
    """How ``update_rows`` prepares a field's values for COPY: as they are when Django's own
    preparation would give them back unchanged (text, flags, integers and keys, aware times:
    on PostgreSQL each of those steps returns its value), else Django's, per value -- which
    cost more than the COPY itself for a cycle's thousands of rows."""

    def django(value: Any) -> Any:
        return _plain(field.get_db_prep_save(value, connection))

    target = field.target_field if isinstance(field, ForeignKey) else field
    taken: Callable[[Any], bool] | None = None
    if isinstance(field, JSONField):
        taken = None
    elif isinstance(target, DateTimeField):
        taken = _aware
    elif isinstance(target, (CharField, TextField)):
        taken = _text
    elif isinstance(target, BooleanField):
        taken = _flag
    elif isinstance(target, IntegerField):
        taken = _number
    if taken is None:
        return django
    accepts = taken

    def prepared(value: Any) -> Any:
        return value if accepts(value) else django(value)

    return prepared


def update_rows(
    model: type[Model],
    columns: Sequence[str],
    rows: Mapping[int, Sequence[Any]],
    *,
    keep_keys: Mapping[str, Sequence[str]] | None = None,
    only_keys: Mapping[str, Sequence[str]] | None = None,
    where: tuple[str, str] | None = None,
    prepared: bool = False,
    unset: Collection[str] = (),
) -> int:
    """Set ``columns`` of many rows at once, each to its own values (``rows``: id -> values).

    ``keep_keys``: for a JSON column, keys whose current values survive the new value (set
    only when the row has them); ``only_keys``: for a JSON column, the keys the new value
    sets (or removes, when it lacks them), every other key being kept.
    ``where``: (column, value) that the rows written must have (others are left alone).
    ``unset``: columns (field names) whose ``None`` leaves the row's value as it is, so that
    one write can set a column on some of its rows only (no row of those gets NULL).
    ``prepared`` (PostgreSQL only): the values are already as ``COPY`` takes them -- JSON as
    its text, the rest as the driver adapts them -- and skip the fields' own preparation
    (Django's JSON adaptation cost more than the ``COPY`` of the row).
    On PostgreSQL the values go into a temporary table by ``COPY``, then one ``UPDATE ...
    FROM`` it (``_staging_table``: one per session and set of column types, emptied after
    use and at each commit, so no call creates or drops a table but the session's first);
    elsewhere the JSON columns' current values are read first, then ``bulk_update``.
    Returns the number of rows given.
    """
    if not rows:
        return 0
    keep_keys, only_keys = keep_keys or {}, only_keys or {}
    meta = model._meta
    fields: list[Any] = [meta.get_field(column) for column in columns]
    table = connection.ops.quote_name(meta.db_table)
    if connection.vendor != "postgresql":
        _update_rows_elsewhere(model, fields, rows, keep_keys, only_keys, where, unset)
        return len(rows)
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        temporary, staged = _staged(cursor, fields, rows, prepared)
        assignments = []
        for i, f in enumerate(fields):
            column = connection.ops.quote_name(f.column)
            value = f"t.c{i}"
            kept, only = keep_keys.get(f.name, ()), only_keys.get(f.name, ())
            if kept:
                value = _keeping(f"t.c{i}", f"{table}.{column}", kept)
            elif only:
                removed = "".join(f" - '{key}'" for key in only)
                value = (
                    f"(COALESCE({table}.{column}, '{{}}'::jsonb){removed}) "
                    f"|| COALESCE(t.c{i}, '{{}}'::jsonb)"
                )
            elif f.name in unset:
                value = f"COALESCE(t.c{i}, {table}.{column})"
            assignments.append(f"{column} = {value}")
        condition, params = "", []
        if where is not None:
            condition = f" AND {table}.{connection.ops.quote_name(where[0])} = %s"
            params.append(where[1])
        key = connection.ops.quote_name(meta.pk.column)
        with _probing_the_key(cursor):
            cursor.execute(
                # ``LIMIT``: the table holds exactly the rows just staged (emptied after each
                # use and at commit; a roll-back takes the rows with it); the staging table has
                # no statistics, and this tells the planner how many.
                f"UPDATE {table} SET {', '.join(assignments)} "  # noqa: S608
                f"FROM (SELECT * FROM {temporary} LIMIT {int(staged)}) t "
                f"WHERE {table}.{key} = t.id{condition}",
                params,
            )
        cursor.execute(f"DELETE FROM {temporary}")  # noqa: S608 (empty for the next call)
    return len(rows)


def upsert_rows(
    model: type[Model],
    columns: Sequence[str],
    rows: Mapping[int, Sequence[Any]],
    *,
    keep_keys: Mapping[str, Sequence[str]] | None = None,
    prepared: bool = False,
) -> int:
    """Insert many rows keyed by their primary key, each with its own values (``rows``:
    key -> values in ``columns`` order, every column an insert needs), or set those columns
    where a row of the key is there already. ``keep_keys`` and ``prepared`` as in
    ``update_rows`` (kept keys only from a row that was there). On PostgreSQL the values are
    staged as ``update_rows`` stages them, then one ``INSERT ... ON CONFLICT DO UPDATE``;
    elsewhere the kept keys are read first, then ``bulk_create`` with ``update_conflicts``.
    Returns the number of rows given."""
    if not rows:
        return 0
    keep_keys = keep_keys or {}
    meta = model._meta
    fields: list[Any] = [meta.get_field(column) for column in columns]
    if connection.vendor != "postgresql":
        _upsert_rows_elsewhere(model, fields, rows, keep_keys)
        return len(rows)
    quote = connection.ops.quote_name
    table, key = quote(meta.db_table), quote(meta.pk.column)
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        temporary, staged = _staged(cursor, fields, rows, prepared)
        names = ", ".join(quote(f.column) for f in fields)
        values = ", ".join(f"t.c{i}" for i in range(len(fields)))
        assignments = []
        for f in fields:
            column = quote(f.column)
            value = f"EXCLUDED.{column}"
            kept = keep_keys.get(f.name, ())
            if kept:
                value = _keeping(value, f"{table}.{column}", kept)
            assignments.append(f"{column} = {value}")
        cursor.execute(
            f"INSERT INTO {table} ({key}, {names}) "  # noqa: S608
            f"SELECT t.id, {values} FROM (SELECT * FROM {temporary} LIMIT {int(staged)}) t "
            f"ON CONFLICT ({key}) DO UPDATE SET {', '.join(assignments)}"
        )
        cursor.execute(f"DELETE FROM {temporary}")  # noqa: S608 (empty for the next call)
    return len(rows)


def _keeping(new: str, old: str, kept: Sequence[str]) -> str:
    """SQL for a JSON column's ``new`` value with the ``kept`` keys of its ``old`` value laid
    over it (where the old value has them: a key it lacks is not set)."""
    pairs = ", ".join(f"'{key}', {old} -> '{key}'" for key in kept)
    return f"COALESCE({new}, '{{}}'::jsonb) || jsonb_strip_nulls(jsonb_build_object({pairs}))"


def _staged(
    cursor: Any, fields: Sequence[Any], rows: Mapping[int, Sequence[Any]], prepared: bool
) -> tuple[str, int]:
    """``rows`` (key -> values of ``fields``) copied into the session's staging table for
    their column types (``_staging_table``: ``id``, then ``c0``, ``c1``, ...); returns its
    name and how many rows went in. ``prepared``: as ``update_rows`` says."""
    temporary = _staging_table(cursor, [f.db_type(connection) for f in fields])
    prepare = [_preparer(f) for f in fields]
    staged = copy_rows(
        cursor,
        temporary,
        ["id", *(f"c{i}" for i in range(len(fields)))],
        ((pk, *values) for pk, values in rows.items())
        if prepared
        else (
            (pk, *(p(v) for p, v in zip(prepare, values, strict=True)))
            for pk, values in rows.items()
        ),
    )
    return temporary, staged


@contextmanager
def _probing_the_key(cursor: Any) -> Iterator[None]:
    """The statements of the block joined by probing the key's index, row by row (a nested
    loop), not by hashing or sorting a scan of the whole table: hash and merge joins off for
    the block, then set back to what they were. Without it the planner, which prices a probe
    as a page read from disk (``random_page_cost`` 4) where these tables' pages are in
    memory, hashed a scan of all ~31,000 workload rows (about 14 ms) for any batch above 500
    rows or so: at B1-loop's size, 800 explanations staged by hand took 19-23 ms that way and
    7-9 ms by the index; in the loop's steady cycles the explanations' update (550-1,060
    rows) took a median of 20 against 26 ms (``docs/benchmarks.md``, B1-loop "sixth
    session"); the first cycle's 5,180 rows gain nothing measurable. The settings are the
    transaction's own (``set_config(..., true)``); a statement that fails aborts the
    transaction, whose end undoes them, so they are set back only after one that succeeds.
    The values before are read in a subquery (``OFFSET 0`` keeps the planner from folding it
    into the outer list, whose ``set_config`` calls run on the row it returns)."""
    cursor.execute(
        "SELECT h, m, set_config('enable_hashjoin', 'off', true), "
        "set_config('enable_mergejoin', 'off', true) FROM (SELECT "
        "current_setting('enable_hashjoin') AS h, current_setting('enable_mergejoin') AS m "
        "OFFSET 0) AS before"
    )
    hashjoin, mergejoin, _, _ = cursor.fetchone()
    yield
    cursor.execute(
        "SELECT set_config('enable_hashjoin', %s, true), set_config('enable_mergejoin', %s, true)",
        [hashjoin, mergejoin],
    )


def _staging_table(cursor: Any, types: Sequence[str]) -> str:
    """The name of the session's temporary table for ``update_rows`` with columns of
    ``types`` (``id bigint, c0, c1, ...``), made when the session has none yet: it lives as
    long as the session and is emptied at each commit (``ON COMMIT DELETE ROWS``), so the
    cycle's writes do not create and drop a table each -- catalog rows written and removed
    every call (a table made in a transaction that is rolled back goes with it, and the next
    call makes it again)."""
    typed = ", ".join(f"c{i} {kind}" for i, kind in enumerate(types))
    name = "gpupool_rows_" + hashlib.sha1(typed.encode(), usedforsecurity=False).hexdigest()[:12]
    cursor.execute(
        f"CREATE TEMPORARY TABLE IF NOT EXISTS {name} (id bigint, {typed}) ON COMMIT DELETE ROWS"
    )
    return name


def _update_rows_elsewhere(
    model: type[Model],
    fields: Sequence[Any],
    rows: Mapping[int, Sequence[Any]],
    keep_keys: Mapping[str, Sequence[str]],
    only_keys: Mapping[str, Sequence[str]],
    where: tuple[str, str] | None,
    unset: Collection[str] = (),
) -> None:
    """``update_rows`` without PostgreSQL: kept keys (and the ``unset`` columns' values)
    read first, then ``bulk_update``."""
    manager: Any = model.objects  # type: ignore[attr-defined]
    ids = list(rows)
    if where is not None:
        ids = list(manager.filter(pk__in=ids, **{where[0]: where[1]}).values_list("pk", flat=True))
    current: dict[str, dict[int, Any]] = {
        name: dict(manager.filter(pk__in=ids).values_list("pk", name))
        for name in {*keep_keys, *only_keys, *unset}
    }
    objects = []
    for pk in ids:
        obj = model(pk=pk)
        for field_, value in zip(fields, rows[pk], strict=True):
            kept, only = keep_keys.get(field_.name, ()), only_keys.get(field_.name, ())
            before = current[field_.name].get(pk) or {} if kept or only else {}
            if kept:
                value = _kept_in(value, before, kept)
            elif only:
                value = {**{k: v for k, v in before.items() if k not in only}, **(value or {})}
            elif value is None and field_.name in unset:
                value = current[field_.name][pk]
            setattr(obj, field_.attname, value)
        objects.append(obj)
    manager.bulk_update(objects, [f.name for f in fields], batch_size=500)


def _upsert_rows_elsewhere(
    model: type[Model],
    fields: Sequence[Any],
    rows: Mapping[int, Sequence[Any]],
    keep_keys: Mapping[str, Sequence[str]],
) -> None:
    """``upsert_rows`` without PostgreSQL: the kept keys of the rows there read first, then
    one ``bulk_create`` that updates the rows whose key is taken."""
    manager: Any = model.objects  # type: ignore[attr-defined]
    current: dict[str, dict[int, Any]] = {
        name: dict(manager.filter(pk__in=list(rows)).values_list("pk", name)) for name in keep_keys
    }
    objects = []
    for pk, values in rows.items():
        obj = model(pk=pk)
        for field_, value in zip(fields, values, strict=True):
            kept = keep_keys.get(field_.name, ())
            if kept:
                value = _kept_in(value, current[field_.name].get(pk) or {}, kept)
            setattr(obj, field_.attname, value)
        objects.append(obj)
    manager.bulk_create(
        objects,
        batch_size=500,
        update_conflicts=True,
        unique_fields=[model._meta.pk.name],
        update_fields=[f.name for f in fields],
    )


def _kept_in(value: Any, before: Mapping[str, Any], kept: Sequence[str]) -> dict[str, Any]:
    """A JSON column's new ``value`` with the ``kept`` keys of ``before`` laid over it (those
    it has): ``_keeping``'s SQL, in Python, for the databases without it."""
    return {**(value or {}), **{key: before[key] for key in kept if key in before}}
