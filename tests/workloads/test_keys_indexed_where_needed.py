"""Keys that are almost always empty are indexed only where set, and no key has an index of
its own when a composite index leads with it (workloads 0009, accounting 0008): each index
is an entry to write for every row the loop inserts, and these bought no lookup."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from domain_builders import flavor, node, priority_class, queue, tenant, user

from gpupool.accounting.models import UsageInterval
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Placement, Workload, WorkloadTransition

pytestmark = pytest.mark.django_db

on_postgresql = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="reads PostgreSQL's plans"
)


def indexes(model: type[Model]) -> dict[str, tuple[list[str], str]]:
    """The table's indexes (primary key and unique ones included): their columns, and the
    condition of a partial one ("" for a full one), from the database's own catalog."""
    table = model._meta.db_table
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [table]
            )
        else:
            cursor.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = %s",
                [table],
            )
        definitions = {name: sql or "" for name, sql in cursor.fetchall()}
    conditions = {
        name: re.sub(r'[()"]', "", sql.partition(" WHERE ")[2]).strip()
        for name, sql in definitions.items()
    }
    return {
        name: (list(constraint["columns"]), conditions.get(name, ""))
        for name, constraint in found.items()
        if constraint["index"] or constraint["unique"] or constraint["primary_key"]
    }


@pytest.mark.parametrize(
    ("model", "column", "name"),
    [
        (Workload, "submitter_id", "workload_submitter_idx"),
        (Workload, "evicting_for_id", "workload_evicting_for_idx"),
        (WorkloadTransition, "actor_id", "workloadtransition_actor_idx"),
    ],
)
def test_a_key_almost_always_empty_is_indexed_only_where_set(
    model: type[Model], column: str, name: str
) -> None:
    leading = {
        index: condition
        for index, (columns, condition) in indexes(model).items()
        if columns[0] == column
    }
    assert leading == {name: f"{column} IS NOT NULL"}


@pytest.mark.parametrize(
    ("model", "column", "composites"),
    [
        (Placement, "pod_set_id", {"placement_unique_pod": ["pod_set_id", "pod_index"]}),
        (UsageInterval, "tenant_id", {"usage_tenant_start_idx": ["tenant_id", "started_at"]}),
        (UsageInterval, "queue_id", {"usage_queue_start_idx": ["queue_id", "started_at"]}),
    ],
)
def test_a_key_a_composite_index_leads_with_has_no_index_of_its_own(
    model: type[Model], column: str, composites: dict[str, list[str]]
) -> None:
    leading = {
        index: columns
        for index, (columns, condition) in indexes(model).items()
        if columns[0] == column and not condition
    }
    assert leading == composites


def plan(sql: str, params: list[object] | tuple[object, ...] = ()) -> str:
    """PostgreSQL's plan for the statement with sequential scans priced out, so an index
    that can serve it shows (the test tables are tiny)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def statements_on(queries: list[dict[str, str]], table: str, column: str) -> list[str]:
    """The statements run that find rows of ``table`` by ``column``."""
    key = re.compile(rf'WHERE .*"{table}"\."{column}" (IN|=)')
    return [query["sql"] for query in queries if key.search(query["sql"])]


@pytest.fixture
def running() -> tuple[Workload, Workload]:
    """A pending workload and a running one being evicted for it, both submitted by ann."""
    priority_class("normal", default=True)
    ann = user("ann")
    team = queue("team", parent=queue("root"), tenant=tenant("acme", members=(ann,)))
    first = do_submit_workload("first", queue=team, pod_sets=[PodSetSpec(1)], submitter=ann)
    second = do_submit_workload("second", queue=team, pod_sets=[PodSetSpec(1)], submitter=ann)
    Workload.objects.filter(pk=second.pk).update(evicting_for=first)
    return first, second


@on_postgresql
def test_the_lookups_by_submitter_and_preemptor_use_the_partial_indexes(
    running: tuple[Workload, Workload],
) -> None:
    first, second = running
    ann = first.submitter
    assert ann is not None
    by_submitter = Workload.objects.filter(submitter=ann)
    assert "workload_submitter_idx" in plan(*by_submitter.query.sql_with_params())
    leaving = first.victims_leaving.all()
    assert list(leaving) == [second]
    assert "workload_evicting_for_idx" in plan(*leaving.query.sql_with_params())
    # The database's own key check when a preemptor is deleted, as a generic plan.
    check = 'SELECT 1 FROM ONLY workloads_workload x WHERE %s = "evicting_for_id" FOR KEY SHARE'
    assert "workload_evicting_for_idx" in plan(check, [first.pk])
    # Deleting the submitter empties its workloads' key (SET_NULL), found by the index.
    with CaptureQueriesContext(connection) as deleting:
        ann.delete()
    found = statements_on(deleting.captured_queries, "workloads_workload", "submitter_id")
    assert found
    for sql in found:
        assert "workload_submitter_idx" in plan(sql)
    assert Workload.objects.filter(submitter__isnull=True).count() == 2


@on_postgresql
def test_the_lookups_by_actor_use_the_partial_index(running: tuple[Workload, Workload]) -> None:
    first, _ = running
    bob = user("bob")
    WorkloadTransition.objects.create(
        workload=first,
        from_state="pending",
        to_state="cancelled",
        at=timezone.now(),
        reason="cancelled by bob",
        actor=bob,
    )
    by_actor = WorkloadTransition.objects.filter(actor=bob)
    assert "workloadtransition_actor_idx" in plan(*by_actor.query.sql_with_params())
    with CaptureQueriesContext(connection) as deleting:
        bob.delete()
    found = statements_on(deleting.captured_queries, "workloads_workloadtransition", "actor_id")
    assert found
    for sql in found:
        assert "workloadtransition_actor_idx" in plan(sql)


@on_postgresql
def test_the_lookups_by_pod_set_tenant_and_queue_use_the_composite_indexes(
    running: tuple[Workload, Workload],
) -> None:
    first, _ = running
    pod_set = first.pod_sets.get()
    h100 = flavor("h100")
    Placement.objects.create(workload=first, pod_set=pod_set, node=node("n1", of=h100))
    start = timezone.now() - timedelta(hours=1)
    UsageInterval.objects.create(
        workload=first,
        tenant=first.queue.tenant,
        queue=first.queue,
        flavor=h100,
        priority_class=first.priority_class,
        gpus=Decimal(1),
        started_at=start,
    )
    # A queue's usage since a moment is also served by the index on the start alone; which
    # one the planner takes is a matter of statistics, and a tiny table without them ties
    # the two (a fresh database's CI took the start's). Another queue's usage over the same
    # hour, counted by ANALYZE, makes the queue the selective key, as it is in a pool.
    others = do_submit_workload(
        "others",
        queue=queue("others", parent=first.queue.parent, tenant=first.queue.tenant),
        pod_sets=[PodSetSpec(1)],
    )
    UsageInterval.objects.bulk_create(
        UsageInterval(
            workload=others,
            tenant=others.queue.tenant,
            queue=others.queue,
            flavor=h100,
            priority_class=others.priority_class,
            gpus=Decimal(1),
            started_at=start + timedelta(seconds=second),
        )
        for second in range(300)
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {UsageInterval._meta.db_table}")
    # Unordered, as the deletions' look-ups are (a model's ordering joins other tables,
    # and the plan may then start from them).
    lookups = {
        "placement_unique_pod": Placement.objects.filter(pod_set=pod_set).order_by(),
        "usage_tenant_start_idx": UsageInterval.objects.filter(
            tenant=first.queue.tenant
        ).order_by(),
        "usage_queue_start_idx": UsageInterval.objects.filter(queue=first.queue).order_by(),
    }
    since = UsageInterval.objects.filter(queue=first.queue, started_at__gte=start).order_by()
    for index, lookup in [*lookups.items(), ("usage_queue_start_idx", since)]:
        assert lookup.exists()
        assert index in plan(*lookup.query.sql_with_params()), index
