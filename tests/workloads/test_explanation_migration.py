"""Migration workloads 0010 moves the loop's explanations and queue ranks off the workload's
row into ``WorkloadExplanation``, and back when unapplied: nothing a page shows is lost."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from domain_builders import priority_class, queue

BEFORE = [("workloads", "0009_keys_indexed_where_needed")]
AFTER = [("workloads", "0010_workload_explanation")]
AT = datetime(2026, 12, 5, 8, 0, tzinfo=UTC)


def _migrate(to: list[tuple[str, str]]) -> Any:
    """Migrate to ``to``; returns the apps (historical models) as they are there."""
    executor = MigrationExecutor(connection)
    executor.migrate(to)
    executor.loader.build_graph()
    return executor.loader.project_state(to).apps


@pytest.fixture
def at_0009(transactional_db: None) -> Iterator[Any]:
    """The database at 0009, set forward to the latest state afterwards."""
    try:
        yield _migrate(BEFORE)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


def test_explanations_move_to_their_own_table_and_back(at_0009: Any) -> None:
    klass = priority_class("normal", default=True)
    team = queue("team", parent=queue("root"))
    old = at_0009.get_model("workloads", "Workload")

    def workload(name: str, **explanation: Any) -> int:
        return int(
            old.objects.create(
                namespace="default",
                name=name,
                queue_id=team.pk,
                priority_class_id=klass.pk,
                submitted_at=AT,
                **explanation,
            ).pk
        )

    waiting = workload(
        "waiting",
        pending_reason="quota",
        pending_detail="Queue team has no quota left.",
        pending_facts={"asked": 4, "estimate_learned": True},
        queue_rank=2.5,
    )
    ranked_only = workload("ranked-only", queue_rank=-1.0)
    unexplained = workload("unexplained")

    new = _migrate(AFTER)
    rows = {
        row.workload_id: (row.reason, row.detail, row.facts, row.queue_rank)
        for row in new.get_model("workloads", "WorkloadExplanation").objects.all()
    }
    assert rows == {
        waiting: (
            "quota",
            "Queue team has no quota left.",
            {"asked": 4, "estimate_learned": True},
            2.5,
        ),
        ranked_only: ("", "", {}, -1.0),
    }
    assert unexplained not in rows

    back = _migrate(BEFORE)
    columns = ("pending_reason", "pending_detail", "pending_facts", "queue_rank")
    again = {
        row[0]: row[1:]
        for row in back.get_model("workloads", "Workload").objects.values_list("pk", *columns)
    }
    assert again[waiting] == rows[waiting]
    assert again[ranked_only] == rows[ranked_only]
    assert again[unexplained] == ("", "", {}, None)
