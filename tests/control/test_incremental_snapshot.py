"""The loop's incremental snapshot equals a full rebuild after any sequence of changes.

A seeded walk changes the small pool of control_builders through the actions (submissions,
admissions and their ends, cancellations, cordons, GPU health, drains, checkpoints and
nominations, quotas, budgets, preemptions); after each step the loop's state reads only what
changed, and its snapshot must equal what ``build_snapshot`` reads from scratch. The state
keeps the snapshot's parts between assemblies and patches them by the rows touched since
(``LoopState._catch_up``), and keeps indexes of its rows (``WorkloadRows``): both must equal
what they would be built afresh, whichever way a row changed.
"""

from __future__ import annotations

import copy
import dataclasses
import random
from typing import Any

import pytest
from control_builders import NOW, POLICY, Pool, loop_sets, minutes_before_now, submit
from django.utils import timezone

from gpupool.accounting.actions import do_record_preemption
from gpupool.control.snapshot import build_snapshot
from gpupool.control.state import LoopState, WorkloadRows, policy_fingerprint
from gpupool.inventory.actions import do_drain_node, do_set_gpu_health, do_set_node_cordoned
from gpupool.inventory.models import Gpu, Node
from gpupool.quotas.actions import (
    do_grant_budget,
    do_save_priority_class,
    do_save_queue,
    do_set_queue_quota,
)
from gpupool.quotas.models import PriorityBudget
from gpupool.scheduler.types import WorkloadInfo
from gpupool.utilization.actions import do_record_activity
from gpupool.workloads.actions import PlacementSpec, PodSetSpec, do_transition_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


def _change(pool: Pool, rng: random.Random, step: int) -> str:
    """One random change of the pool, through the actions; says what it did."""
    h100 = pool.flavors["h100"]
    kind = rng.choice(
        [
            "submit",
            "admit",
            "end",
            "cancel",
            "cordon",
            "health",
            "drain",
            "loop",
            "quota",
            "budget",
            "preempt",
            "idle",
            "idle-policy",
            "idle-evict",
        ]
    )
    pending = list(Workload.objects.filter(state="pending"))
    placed = list(Workload.objects.filter(state__in=["admitted", "running"]))
    if kind == "submit":
        team = pool.queues[rng.choice(["team-a", "team-b"])]
        submit(f"walk-{step}", team, PodSetSpec(1, gpus=1, flavor=h100), minute=rng.uniform(1, 5))
    elif kind == "admit" and pending:
        workload = rng.choice([w for w in pending if w.pod_sets.first().gpus == 1] or pending)
        pod_set = workload.pod_sets.first()
        if pod_set.flavor_id == h100.pk and pod_set.gpus == 1 and pod_set.count == 1:
            free = (
                0 if not Workload.objects.filter(placements__node=pool.nodes["n2"]).exists() else 1
            )
            do_transition_workload(
                workload,
                "admitted",
                reason="walk",
                at=minutes_before_now(0.5),
                placements=[PlacementSpec(pod_set.name, 0, pool.nodes["n2"], [free])],
            )
    elif kind == "end" and placed:
        workload = rng.choice(placed)
        if workload.state == "running":
            do_transition_workload(workload, "succeeded", reason="walk", at=NOW)
        else:
            do_transition_workload(workload, "pending", reason="walk", at=NOW)
    elif kind == "cancel" and pending:
        do_transition_workload(rng.choice(pending), "cancelled", reason="walk", at=NOW)
    elif kind == "cordon":
        node = rng.choice(list(Node.objects.all()))
        do_set_node_cordoned(node, cordoned=not node.cordoned, acting_user=None)
    elif kind == "health":
        gpu = rng.choice(list(Gpu.objects.all()))
        do_set_gpu_health(gpu, healthy=not gpu.healthy, reason="walk", acting_user=None)
    elif kind == "drain":
        do_drain_node(rng.choice(list(Node.objects.all())), acting_user=None)
    elif kind == "loop" and placed:
        workload = rng.choice(placed)
        loop_sets(
            workload,
            last_checkpoint_at=minutes_before_now(rng.uniform(0, 30)),
            updated_at=timezone.now(),  # the loop's own writes stamp the row
        )
    elif kind == "quota":
        do_set_queue_quota(
            pool.queues["team-b"],
            h100,
            guarantee=0,
            deserved=rng.randint(1, 4),
            capability=8,
            acting_user=None,
        )
    elif kind == "budget":
        budget = rng.choice(list(PriorityBudget.objects.select_related("tenant", "priority_class")))
        do_grant_budget(
            budget.tenant,
            budget.priority_class,
            period_start=budget.period_start,
            period_end=budget.period_end,
            gpu_hours=rng.randint(1, 200),
            acting_user=None,
        )
    elif kind == "preempt" and placed:
        do_record_preemption(
            rng.choice(placed),
            reason="node-failure",
            at=minutes_before_now(rng.uniform(0, 60)),
            gpus_freed=1,
            lost_gpu_hours=0,
        )
    elif kind == "idle" and placed:
        workload = rng.choice(placed)
        since = rng.choice([None, minutes_before_now(rng.uniform(0, 0.4))])
        do_record_activity([], idle_since={workload.pk: since})  # the sampler's write
    elif kind == "idle-policy":
        klass = pool.classes[rng.choice(["normal", "high"])]
        klass.idle_alert_after_s = rng.choice([None, 600])
        klass.idle_reclaim_after_s = rng.choice([None, 3600])
        do_save_priority_class(klass, acting_user=None)
        team = pool.queues[rng.choice(["team-a", "team-b"])]
        team.idle_reclaim_after_s = rng.choice([None, 7200])
        do_save_queue(team, acting_user=None)
    elif kind == "idle-evict" and placed:
        loop_sets(rng.choice(placed), eviction_reason="idle", updated_at=timezone.now())
    return kind


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_incremental_snapshot_equals_a_full_rebuild_after_random_changes(
    pool: Pool, seed: int
) -> None:
    rng = random.Random(seed)
    state = LoopState(POLICY)
    state.refresh(NOW)
    assert state.snapshot(NOW).snapshot == build_snapshot(now=NOW, policy=POLICY).snapshot
    for step in range(25):
        did = _change(pool, rng, step)
        state.refresh(NOW)
        incremental = state.snapshot(NOW)
        full = build_snapshot(now=NOW, policy=POLICY)
        assert incremental.snapshot == full.snapshot, f"after step {step} ({did})"
        assert incremental.workload_ids == full.workload_ids
        assert incremental.pod_set_ids == full.pod_set_ids
        assert incremental.by_name == full.by_name == _by_name(full.snapshot.workloads)
        _indexes_equal_a_fresh_build(state.rows, f"after step {step} ({did})")
        copied = copy.copy(state.rows)  # as the loop's state is copied (its indexes rebuilt)
        assert copied == state.rows and type(copied) is WorkloadRows
        _indexes_equal_a_fresh_build(copied, f"a copy after step {step}")


def _by_name(workloads: tuple[WorkloadInfo, ...]) -> dict[str, WorkloadInfo]:
    return {w.name: w for w in workloads}


def _indexes_equal_a_fresh_build(rows: WorkloadRows, after: str) -> None:
    assert rows.placed == {n for n, r in rows.items() if r.state != "pending"}, after
    assert rows.unestimated == {n for n, r in rows.items() if r.info.expected_runtime_s is None}, (
        after
    )


def test_the_kept_snapshot_follows_rows_changed_in_place_overlaid_and_left_out(pool: Pool) -> None:
    """Rows replaced, removed and added straight in the mapping (as the loop's record and
    sync do), a workload overlaid and one left out: the assembled snapshot is what the rows
    say, in name order, each time."""
    state = LoopState(POLICY)
    state.refresh(NOW)
    first = state.snapshot(NOW).snapshot
    names = state.workload_order()
    assert len(names) >= 3
    moment = NOW.timestamp()

    def expected(overlay: dict[str, object], leave_out: set[str]) -> tuple[object, ...]:
        return tuple(
            overlay.get(name) or state.rows[name].resolve(state.names, moment)
            for name in sorted(state.rows)
            if name not in leave_out
        )

    changed, removed, kept = names[0], names[1], names[2]
    row = state.rows[changed]
    state.rows[changed] = dataclasses.replace(
        row, info=dataclasses.replace(row.info, expected_runtime_s=None, nominated=True)
    )
    gone = state.rows.pop(removed)
    added = dataclasses.replace(
        gone, info=dataclasses.replace(gone.info, name="zz/added"), id=gone.id + 10_000
    )
    state.rows["zz/added"] = added
    state.names[added.id] = "zz/added"
    overlay = {kept: dataclasses.replace(state.rows[kept].info, missing_pods=1)}
    database = state.snapshot(NOW, overlay, leave_out={changed})
    built = database.snapshot
    assert built.workloads == expected(overlay, {changed})  # type: ignore[arg-type]
    assert database.by_name == _by_name(built.workloads)  # overlaid, left out
    assert database.by_name[kept].missing_pods == 1
    assert state.rows.unestimated >= {changed}
    assert [w.name for w in built.workloads] == sorted(
        set(names) - {removed, changed} | {"zz/added"}
    )
    again = state.snapshot(NOW)
    assert again.snapshot.workloads == expected({}, set())  # type: ignore[arg-type]
    assert again.by_name == _by_name(again.snapshot.workloads)
    del state.rows["zz/added"]
    state.rows[removed] = gone
    state.rows[changed] = row
    assert state.snapshot(NOW).snapshot == first
    _indexes_equal_a_fresh_build(state.rows, "after undoing")


def test_the_policy_tables_are_read_again_only_when_their_digest_changes(pool: Pool) -> None:
    """Flavors, queues and classes are not read again while the digest of their tables' rows
    stays; any change to a row (a queue's weight, a class's value) changes it."""
    from django.db import connection

    if connection.vendor != "postgresql":
        assert policy_fingerprint() is None  # read every time
        return
    state = LoopState(POLICY)
    state.refresh(NOW)
    before = policy_fingerprint()
    assert before is not None and state._policy_seen == before
    state.refresh(NOW)
    assert policy_fingerprint() == before
    team = pool.queues["team-a"]
    team.weight = team.weight * 2 + 1
    do_save_queue(team, acting_user=None)
    assert policy_fingerprint() != before
    state.refresh(NOW)
    assert {q.name: q.weight for q in state.queues}["team-a"] == float(team.weight)
    klass = pool.classes["high"]
    klass.value += 1
    do_save_priority_class(klass, acting_user=None)
    assert policy_fingerprint() != state._policy_seen
    state.refresh(NOW)
    assert {c.name: c.value for c in state.classes}["high"] == klass.value
    assert state.snapshot(NOW).snapshot == build_snapshot(now=NOW, policy=POLICY).snapshot


def test_a_node_stamped_once_is_read_once_not_at_every_refresh_until_the_horizon_passes(
    pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync writes the inventory and the refresh after it reads those nodes; the next
    refreshes, their stamps still after the horizon, hold that version and do not read the
    nodes again (500 nodes, 25-50 ms a refresh at B4's size) -- until a node is stamped anew."""
    import gpupool.control.state as state_module

    reads: list[list[int]] = []
    real = state_module.read_nodes

    def counted(flavors: object, only: object = None, **options: Any) -> object:
        reads.append(sorted(only) if only is not None else [])  # type: ignore[call-overload]
        return real(flavors, only, **options)  # type: ignore[arg-type]

    state = LoopState(POLICY)
    state.refresh(NOW)  # the first read: every node
    monkeypatch.setattr(state_module, "read_nodes", counted)
    Node.objects.update(updated_at=timezone.now())  # as the sync writing the inventory
    state.refresh(NOW)  # every node stamped after the horizon: read once
    every = sorted(Node.objects.values_list("id", flat=True))
    assert reads == [every]
    state.refresh(NOW)
    assert reads == [every]  # stamped after the horizon still, but held: not read again
    node = Node.objects.order_by("name").first()
    assert node is not None
    do_set_node_cordoned(node, cordoned=True, acting_user=None)
    state.refresh(NOW)
    state.refresh(NOW)
    assert reads == [every, [node.pk]] and state.nodes[node.name].cordoned
    do_set_node_cordoned(node, cordoned=False, acting_user=None)
    state.refresh(NOW)
    assert reads == [every, [node.pk], [node.pk]] and not state.nodes[node.name].cordoned
    assert state.snapshot(NOW).snapshot == build_snapshot(now=NOW, policy=POLICY).snapshot


def test_a_refresh_of_a_quiet_pool_is_one_statement_and_reads_only_what_changed(
    pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL a refresh first asks what changed since its last horizon, in one
    statement (``read_probe``): nothing changed, nothing more is read (a burst's first cycle
    after a quiet spell); a workload submitted, only the workloads are read; a budget
    granted, only the budgets; a preemption recorded, only the history."""
    import time

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    import gpupool.control.state as state_module

    if connection.vendor != "postgresql":
        pytest.skip("elsewhere a refresh reads everything it keeps up to date")
    monkeypatch.setattr(state_module, "CLOCK_MARGIN_S", 0.0)  # the horizon passes at once

    def refresh(state: LoopState) -> list[str]:
        time.sleep(0.002)  # the database's clock past every stamp so far
        with CaptureQueriesContext(connection) as queries:
            state.refresh(NOW)
        return [q["sql"] for q in queries.captured_queries]

    def tables(statements: list[str]) -> set[str]:
        """The tables the reads after the probe read from (their first FROM)."""
        return {
            sql.split('FROM "', 1)[1].split('"', 1)[0]
            for sql in statements[1:]
            if 'FROM "' in sql and not sql.startswith(("SAVEPOINT", "RELEASE"))
        }

    state = LoopState(POLICY)
    state.refresh(NOW)
    refresh(state)  # what the first read stamped meanwhile
    assert len(refresh(state)) == 1
    submit("late", pool.queues["team-a"], PodSetSpec(1, gpus=1, flavor=pool.flavors["h100"]))
    read = refresh(state)
    assert "default/late" in state.rows
    assert {t.split("_")[0] for t in tables(read)} == {"workloads"}  # rows, pod sets, placements
    assert len(refresh(state)) == 1
    budget = PriorityBudget.objects.select_related("tenant", "priority_class").get(
        period_start__lte=timezone.localdate(NOW),
        period_end__gt=timezone.localdate(NOW),
        tenant__name="a",
        priority_class__name="high",
    )
    do_grant_budget(
        budget.tenant,
        budget.priority_class,
        period_start=budget.period_start,
        period_end=budget.period_end,
        gpu_hours=budget.gpu_hours + 7,
        acting_user=None,
    )
    read = refresh(state)
    assert tables(read) == {"quotas_prioritybudget"}
    granted = {(b.tenant, b.priority_class): b.gpu_hours for b in state.budgets}
    assert granted[("a", "high")] == float(budget.gpu_hours + 7)
    assert len(refresh(state)) == 1
    victim = Workload.objects.get(namespace="default", name="victim")
    do_record_preemption(victim, reason="node-failure", at=NOW, gpus_freed=1, lost_gpu_hours=0)
    read = refresh(state)
    assert tables(read) == {"accounting_preemptionevent"}
    assert len(refresh(state)) == 1
    assert state.snapshot(NOW).snapshot == build_snapshot(now=NOW, policy=POLICY).snapshot
