"""``bulk.insert_values`` writes what Django's own insert writes: JSON columns as JSON (one
shared encoder), the model's other columns their defaults; a row of the wrong width is refused
and nothing of the call is written. ``bulk.update_rows`` joins its staged rows by the key's
index, and leaves the planner's settings as they were."""

from __future__ import annotations

import datetime
import json
import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, connection, transaction
from domain_builders import explained, flavor, priority_class, queue

from gpupool.audit.models import AuditEvent
from gpupool.bulk import (
    _probing_the_key,
    as_json_text,
    insert_values,
    update_rows,
    upsert_rows,
    values_timed,
)
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload, WorkloadExplanation

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


def _plain_events(action: str, count: int) -> int:
    """``count`` audit rows of ``action`` with no JSON column given (``insert_values``)."""
    return insert_values(
        AuditEvent,
        ("action", "object_type", "object_id", "object_repr", "at", "reason"),
        ((action, "t", str(i), "r", AT, "why") for i in range(count)),
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
    assert _plain_events("plain", 3) == 3
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


def _join_plan(cursor: Any, table: str, staged: str, rows: int) -> str:
    cursor.execute(
        f"EXPLAIN UPDATE {table} SET reason = t.reason "  # noqa: S608
        f"FROM (SELECT * FROM {staged} LIMIT {rows}) t WHERE {table}.id = t.id"
    )
    return "\n".join(line for (line,) in cursor.fetchall())


def _join_settings(cursor: Any) -> tuple[str, str]:
    cursor.execute("SELECT current_setting('enable_hashjoin'), current_setting('enable_mergejoin')")
    return tuple(cursor.fetchone())


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_staged_rows_are_joined_by_the_key_s_index_not_by_hashing_the_table() -> None:
    # Without the probe the planner hashes a scan of the whole table for a few thousand staged
    # rows (it prices each probe as a disk read); with it, a nested loop on the primary key.
    _plain_events("many", 20_000)
    table = AuditEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE " + table)
        cursor.execute(
            "CREATE TEMPORARY TABLE probe_staged ON COMMIT DROP AS "  # noqa: S608
            f"SELECT id, 'again' AS reason FROM {table} ORDER BY id DESC LIMIT 3000"
        )
        assert "Hash Join" in _join_plan(cursor, table, "probe_staged", 3000)
        before = _join_settings(cursor)
        with _probing_the_key(cursor):
            plan = _join_plan(cursor, table, "probe_staged", 3000)
            assert _join_settings(cursor) == ("off", "off")
        assert "Nested Loop" in plan and f"Index Scan using {table}_pkey" in plan
        assert "Hash" not in plan and "Merge" not in plan
        assert _join_settings(cursor) == before


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_update_rows_sets_the_planner_back_as_it_found_it() -> None:
    _plain_events("few", 5)
    ids = list(AuditEvent.objects.filter(action="few").values_list("pk", flat=True))
    with connection.cursor() as cursor:
        for hashjoin in ("on", "off"):  # a session that turned hash joins off keeps them off
            cursor.execute("SELECT set_config('enable_hashjoin', %s, true)", [hashjoin])
            update_rows(AuditEvent, ["reason"], dict.fromkeys(ids, (f"why {hashjoin}",)))
            assert _join_settings(cursor) == (hashjoin, "on")
            assert set(AuditEvent.objects.filter(pk__in=ids).values_list("reason", flat=True)) == {
                f"why {hashjoin}"
            }


@pytest.fixture
def two_workloads() -> tuple[Any, Any]:
    """Two pending workloads, neither explained yet."""
    priority_class("normal", default=True)
    team, h100 = queue("team", parent=queue("root")), flavor()
    return tuple(  # type: ignore[return-value]
        do_submit_workload(name, queue=team, pod_sets=[PodSetSpec(1, gpus=1, flavor=h100)])
        for name in ("a", "b")
    )


EXPLANATION = ["reason", "detail", "facts", "queue_rank"]


def _explanations() -> dict[int, tuple[Any, ...]]:
    return {
        row[0]: row[1:]
        for row in WorkloadExplanation.objects.values_list("pk", *EXPLANATION).order_by("pk")
    }


def test_upsert_rows_inserts_new_keys_and_updates_taken_ones_keeping_only_their_keys(
    two_workloads: tuple[Any, Any],
) -> None:
    taken, new = two_workloads
    explained(taken, "quota", "old", {"asked": 1, "kept": "yes", "dropped": 2}, 1.0)
    assert upsert_rows(WorkloadExplanation, EXPLANATION, {}) == 0
    given = upsert_rows(
        WorkloadExplanation,
        EXPLANATION,
        {
            taken.pk: ("capacity", "new", {"asked": 2}, 2.0),
            new.pk: ("gang", "first", {"asked": 3, "kept": None}, None),
        },
        keep_keys={"facts": ["kept", "absent"]},
    )
    assert given == 2
    assert _explanations() == {
        taken.pk: ("capacity", "new", {"asked": 2, "kept": "yes"}, 2.0),
        new.pk: ("gang", "first", {"asked": 3, "kept": None}, None),  # nothing there to keep
    }


def test_an_upsert_refused_by_the_database_leaves_every_row_as_it_was(
    two_workloads: tuple[Any, Any],
) -> None:
    taken, new = two_workloads
    explained(taken, "quota", "old", {"asked": 1}, 1.0)
    before = _explanations()
    with pytest.raises(IntegrityError), transaction.atomic():
        upsert_rows(
            WorkloadExplanation,
            EXPLANATION,
            {taken.pk: ("capacity", "new", {}, 2.0), new.pk: ("bored", "no such reason", {}, None)},
        )
    assert _explanations() == before


def test_values_timed_reads_every_moment_exactly_as_django_does(
    two_workloads: tuple[Any, Any],
) -> None:
    """``values_timed`` reads the model's date-time fields as microseconds since the epoch
    on PostgreSQL (no text parsed in Python): the same aware moments as ``values_list``, to
    the microsecond, nulls kept, and fields across a relation and not date-times as they
    are."""
    first, second = two_workloads
    odd = datetime.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=datetime.UTC)
    Workload.objects.filter(pk=first.pk).update(
        submitted_at=odd, admitted_at=AT + datetime.timedelta(microseconds=1)
    )
    fields = ("id", "submitted_at", "admitted_at", "finished_at", "queue__name", "state")
    queryset = Workload.objects.filter(pk__in=[first.pk, second.pk]).order_by("pk")
    timed = values_timed(queryset, *fields)
    assert timed == list(queryset.values_list(*fields))
    assert timed[0][1] == odd and timed[0][2] == AT + datetime.timedelta(microseconds=1)
    assert timed[0][1].utcoffset() == datetime.timedelta(0)
    assert timed[1][2] is None and timed[0][3] is None and timed[0][4] == "team"
