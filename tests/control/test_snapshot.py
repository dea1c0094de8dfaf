"""The snapshot builder: the database, the core's snapshot and the scenario file agree."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from control_builders import (
    NOW,
    POLICY,
    Pool,
    add_pool,
    build_pool,
    loop_sets,
    minutes_before_now,
)
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from domain_builders import node

from gpupool.clusters.grouping import WorkloadKey
from gpupool.control.loop import ControlLoop
from gpupool.control.snapshot import (
    CLUSTER_UNHEALTHY,
    WORKLOAD_INFO_ORDER,
    DatabaseSnapshot,
    SnapshotError,
    WorkloadRow,
    _by_name,
    build_snapshot,
    info_with,
    plain_rows,
    pod_set_info,
    pod_set_infos,
    read_nodes,
    read_workloads,
    workload_row,
)
from gpupool.control.state import LoopState
from gpupool.control.sync import key_order
from gpupool.inventory.models import Flavor, Gpu, Node
from gpupool.quotas.models import PriorityClass
from gpupool.scheduler import plan
from gpupool.scheduler.scenario import scenario_from_dict, snapshot_to_dict
from gpupool.scheduler.types import (
    MigInfo,
    PodPlacement,
    PodSetInfo,
    PolicyInfo,
    PreemptionEventInfo,
    QuotaInfo,
    WorkloadInfo,
)
from gpupool.workloads.choices import LIVE_STATES
from gpupool.workloads.models import Placement, PodSet

pytestmark = pytest.mark.django_db

# What build_snapshot reads, one query each: flavors, GPUs, nodes, quotas, queues, classes,
# flavor choices, pod sets, placements, workloads, budgets, preemption history.
QUERIES = 12


def built(now: datetime = NOW) -> DatabaseSnapshot:
    """The pool's snapshot at ``now`` under the default policy."""
    return build_snapshot(now=now, policy=POLICY)


def workload_info(database: DatabaseSnapshot, name: str) -> WorkloadInfo:
    """One workload of the snapshot, by core name."""
    return next(w for w in database.snapshot.workloads if w.name == name)


def test_flavors_carry_sharing_memory_price_and_their_mig_profile(pool: Pool) -> None:
    flavors = {f.name: f for f in built().snapshot.flavors}
    assert flavors["l4s"].sharing == "shared"
    assert (flavors["gb200"].gpu_memory_gb, flavors["gb200"].hourly_price) == (186.0, 6.0)
    assert flavors["a100-3g.40gb"].sharing == "exclusive"
    assert flavors["a100-3g.40gb"].mig == MigInfo("A100-80GB", "3g.40gb")
    assert flavors["h100"].mig is None


def test_nodes_carry_health_cordon_domain_and_mig_instances(pool: Pool) -> None:
    nodes = {n.name: n for n in built().snapshot.nodes}
    assert nodes["n1"].unhealthy_gpus == frozenset({3})
    assert (nodes["n1"].cpu_milli, nodes["n1"].memory_mib) == (192_000, 2048 * 1024)
    assert nodes["n2"].cordoned and nodes["n2"].healthy_gpus == 0
    assert nodes["g1"].domain == nodes["g2"].domain == "nvl72"
    assert nodes["s1"].domain == "s1"
    mig = nodes["m1"]
    assert (mig.gpus, mig.physical_gpus, mig.unhealthy_gpus) == (4, 2, frozenset({2, 3}))
    assert nodes["n1"].physical_gpus is None


def test_queues_carry_every_field_and_quotas_in_milli_gpu(pool: Pool) -> None:
    queues = {q.name: q for q in built().snapshot.queues}
    team_a = queues["team-a"]
    assert (team_a.parent, team_a.tenant, team_a.weight, team_a.reclaimable) == (
        "org",
        "a",
        2.5,
        False,
    )
    assert team_a.lending_limit == 1500
    assert (team_a.max_protected_runtime_s, team_a.default_protected_runtime_s) == (3600, 600)
    assert team_a.quota["l4s"] == QuotaInfo(500, 1250, 4000)
    assert set(team_a.quota) == {"h100", "gb200", "l4s", "a100-3g.40gb"}
    assert (queues["root"].parent, queues["root"].tenant, dict(queues["root"].quota)) == (
        None,
        None,
        {},
    )
    assert queues["team-b"].lending_limit is None
    assert queues["team-b"].max_protected_runtime_s is None


def test_without_a_default_priority_class_the_builder_says_so(pool: Pool) -> None:
    PriorityClass.objects.filter(default=True).update(default=False)
    with pytest.raises(SnapshotError, match="no default priority class"):
        built()


def test_workloads_that_wait_or_hold_gpus_are_in_and_finished_ones_are_not(pool: Pool) -> None:
    database = built()
    names = [w.name for w in database.snapshot.workloads]
    assert names == sorted(names)
    assert set(names) == {
        "default/gang",
        "default/notebook",
        "default/preemptor",
        "default/rush",
        "default/slice",
        "default/small-notebook",
        "default/small-slice",
        "default/trainer",
        "default/victim",
        "ml/victim",
    }
    assert database.workload_ids["ml/victim"] == pool.workloads["ml/victim"].pk
    states = {w.name: w.state for w in database.snapshot.workloads}
    assert states["default/slice"] == "running"  # admitted: it holds its GPUs
    assert states["ml/victim"] == "pending"


def test_pod_sets_keep_their_submission_order_and_flavor_choices(pool: Pool) -> None:
    database = built()
    trainer = workload_info(database, "default/trainer")
    assert trainer.pod_sets == (
        PodSetInfo(count=1, gpus=8, flavors=("h100",)),
        PodSetInfo(count=3, gpus=0, flavors=(), cpu_milli=2000),
    )
    rows = pool.workloads["default/trainer"].pod_sets.order_by("id")
    assert database.pod_set_ids["default/trainer"] == tuple(p.pk for p in rows)
    assert database.pod_set_id("default/trainer", 1) == rows.get(name="loader").pk
    preemptor = workload_info(database, "default/preemptor")
    assert preemptor.pod_sets[0].flavors == ("gb200", "h100")
    assert (preemptor.min_member, preemptor.topology) == (1, "domain")
    assert (preemptor.expected_runtime_s, preemptor.protected_runtime_s) == (3600.0, 600.0)
    assert preemptor.priority_class == "high"


def test_placements_follow_pod_set_order_then_pod_index(pool: Pool) -> None:
    database = built()
    gang = workload_info(database, "default/gang")
    assert gang.placement == (
        PodPlacement("n1", (4, 5)),
        PodPlacement("n1", (6, 7)),
        PodPlacement("n1", (2,)),
    )
    assert gang.pod_sets[2 - 1].cpu_milli == 12_500
    notebook = workload_info(database, "default/notebook")
    assert notebook.placement == (PodPlacement("s1", (2,), 470),)
    assert notebook.pod_sets[0].gpu_milli == 470


def test_times_are_posix_seconds_and_an_admitted_workload_starts_at_admission(
    pool: Pool,
) -> None:
    database = built()
    assert database.now == NOW.timestamp()
    victim = workload_info(database, "default/victim")
    assert victim.submitted_at == minutes_before_now(70).timestamp()
    assert victim.started_at == minutes_before_now(49).timestamp()
    mig_slice = workload_info(database, "default/slice")
    assert mig_slice.started_at == minutes_before_now(5).timestamp()


@pytest.mark.parametrize("seed", range(3))
def test_times_read_as_seconds_equal_the_rows_datetimes_to_the_microsecond(
    pool: Pool, seed: int
) -> None:
    """``read_workloads`` has PostgreSQL turn timestamps into POSIX seconds (no ``datetime``
    decoded per value): every time must be the very float ``datetime.timestamp()`` gives."""
    rng = random.Random(seed)
    victim = pool.workloads["default/victim"]
    for _ in range(40):
        span = int((NOW - datetime(1999, 1, 1, tzinfo=UTC)).total_seconds() * 1e6)
        start = NOW - timedelta(microseconds=rng.randrange(1, span))
        times = sorted(start + (NOW - start) * rng.random() for _ in range(3))
        submitted = start - timedelta(microseconds=rng.randrange(0, 10**12))
        loop_sets(
            victim,
            submitted_at=submitted,
            started_at=start,
            last_checkpoint_at=times[0],
            idle_since=times[1],
            idle_alerted_since=times[2],
        )
        row = read_workloads(NOW, [victim.pk])["default/victim"]
        assert row.info.submitted_at == submitted.timestamp()
        assert row.info.started_at == start.timestamp()
        assert row.info.last_checkpoint_at == times[0].timestamp()
        assert row.info.idle_since == times[1].timestamp()
        assert row.idle_alerted_since == times[2].timestamp()


def test_the_loop_fields_reach_the_core(pool: Pool) -> None:
    database = built()
    victim = workload_info(database, "default/victim")
    assert victim.evicting_for == "default/preemptor"
    assert victim.last_checkpoint_at == minutes_before_now(20).timestamp()
    assert workload_info(database, "default/preemptor").nominated
    assert not workload_info(database, "ml/victim").nominated
    assert all(w.missing_pods == 0 for w in database.snapshot.workloads)


def test_stale_loop_fields_are_left_out(pool: Pool) -> None:
    loop_sets(pool.workloads["default/victim"], last_checkpoint_at=minutes_before_now(80))
    loop_sets(pool.workloads["default/gang"], last_checkpoint_at=NOW + timedelta(minutes=1))
    loop_sets(pool.workloads["default/notebook"], nominated=True)
    loop_sets(pool.workloads["default/trainer"], evicting_for=pool.workloads["default/gang"])
    loop_sets(pool.workloads["default/slice"], evicting_for=pool.workloads["default/done"])
    database = built()
    assert workload_info(database, "default/victim").last_checkpoint_at is None
    assert workload_info(database, "default/gang").last_checkpoint_at is None
    assert not workload_info(database, "default/notebook").nominated
    assert workload_info(database, "default/trainer").evicting_for is None
    assert workload_info(database, "default/slice").evicting_for is None


def test_a_workload_that_started_after_now_is_refused(pool: Pool) -> None:
    with pytest.raises(SnapshotError, match=r"default/gang started at .* after the snapshot"):
        built(minutes_before_now(55))


def test_a_workload_whose_pod_sets_are_not_there_yet_waits_for_the_next_snapshot(
    pool: Pool,
) -> None:
    """As a workload submitted between the read of the pod sets and that of the workloads."""
    pool.workloads["default/trainer"].pod_sets.all().delete()
    database = built()
    assert "default/trainer" not in database.workload_ids
    assert "default/trainer" not in {w.name for w in database.snapshot.workloads}


def test_placed_pods_that_are_not_a_prefix_of_the_gang_are_refused(pool: Pool) -> None:
    pool.workloads["default/gang"].placements.filter(pod_set__name="workers", pod_index=0).delete()
    with pytest.raises(SnapshotError, match="default/gang: its placed pods are not the first 2"):
        built()


def test_an_only_placed_pod_that_is_not_the_first_of_its_pod_set_is_refused(pool: Pool) -> None:
    pool.workloads["default/notebook"].placements.update(pod_index=1)
    with pytest.raises(SnapshotError, match="default/notebook: its placed pods are not the first"):
        built()


def test_read_workloads_passes_the_core_s_fields_in_their_order() -> None:
    assert tuple(f.name for f in dataclasses.fields(WorkloadInfo)) == WORKLOAD_INFO_ORDER


def test_info_with_changes_the_fields_named_as_dataclasses_replace_does(pool: Pool) -> None:
    infos = built().snapshot.workloads
    changes: list[dict[str, Any]] = [
        {},
        {"state": "running", "started_at": 5.0, "nominated": False, "last_checkpoint_at": None},
        {"leaving": True},
        {"nominated": True, "placement": (), "evicting_for": "ml/victim"},
    ]
    for info in infos:
        for change in changes:
            assert info_with(info, **change) == dataclasses.replace(info, **change)
    with pytest.raises(KeyError):
        info_with(infos[0], no_such_field=1)
    # the row fields the loop's ``_remember`` builds by position: WorkloadRow's, in order
    assert [f.name for f in dataclasses.fields(WorkloadRow)] == [
        "id",
        "info",
        "pod_set_ids",
        "evicting_for_id",
        "state",
        "origin",
        "eviction_reason",
        "idle_alerted_since",
    ]


def test_read_workloads_and_the_sync_sort_by_namespace_then_name_as_the_pairs_sort() -> None:
    # ``_by_name`` keys a row by one string (namespace, NUL, name): the same order as the
    # (namespace, name) pairs, a namespace before those it is a prefix of included.
    words = ["a", "a-b", "a.b", "a0", "ab", "b", "team-a", "team-a-1", "team", "z9", "0"]
    rng = random.Random(3)
    rows = [(i, rng.choice(words), rng.choice(words)) for i in range(400)]
    assert sorted(rows, key=_by_name) == sorted(rows, key=lambda row: (row[1], row[2]))
    # the sync's order of workload keys (``sync.key_order``): the same rule
    keys = [WorkloadKey(namespace, name) for _, namespace, name in rows]
    assert sorted(keys, key=key_order) == sorted(keys)


def test_workload_row_builds_what_the_constructor_builds(pool: Pool) -> None:
    rows = read_workloads(NOW)
    assert rows
    for row in rows.values():
        fields = [getattr(row, f.name) for f in dataclasses.fields(WorkloadRow)]
        assert type(row) is WorkloadRow
        assert row == WorkloadRow(*fields)
        assert workload_row(*fields) == WorkloadRow(*fields)
        assert hash(workload_row(*fields)) == hash(WorkloadRow(*fields))
    with pytest.raises(dataclasses.FrozenInstanceError):
        workload_row(*fields).state = "running"  # type: ignore[misc]


def test_nodes_of_one_flavor_but_other_mig_layouts_count_their_own_instances(pool: Pool) -> None:
    # read_nodes knows a MIG node's instances per GPU by its flavor and layout: the layout's
    # JSON text on PostgreSQL (jsonb's text is canonical), its sorted dump elsewhere.
    mig = pool.flavors["a100-3g.40gb"]
    node("m2", mig, gpus=2, mig_layout={"1g.10gb": 1, "3g.40gb": 1})
    node("m3", mig, gpus=2, mig_layout={"3g.40gb": 1, "1g.10gb": 1})
    node("m4", mig, gpus=3, mig_layout={"3g.40gb": 2})
    flavors = {f.pk: f for f in Flavor.objects.all()}
    nodes, ids = read_nodes(flavors)
    read = {n.name: n for n in nodes}
    assert [n.name for n in nodes] == sorted(read)
    for row in Node.objects.select_related("flavor"):
        physical = row.gpus.count()
        assert ids[row.name] == row.pk
        assert read[row.name].gpus == physical * row.devices_per_gpu(), row.name
    assert [read[name].gpus for name in ("m1", "m2", "m3", "m4")] == [4, 2, 2, 6]


def test_the_sync_s_known_nodes_give_each_node_its_own_mig_layout(pool: Pool) -> None:
    # ``ControlLoop._known_nodes`` decodes a layout's JSON text once for the nodes that share
    # it; each node still gets a dict of its own, equal to its row's.
    mig = pool.flavors["a100-3g.40gb"]
    node("m2", mig, gpus=2, mig_layout={"3g.40gb": 2})
    node("m3", mig, gpus=2, mig_layout={"1g.10gb": 1, "3g.40gb": 1})
    known = ControlLoop._known_nodes(ControlLoop.__new__(ControlLoop), None)
    for row in Node.objects.all():
        assert known[row.name]["mig_layout"] == (row.mig_layout or {}), row.name
    assert known["m1"]["mig_layout"] is not known["m2"]["mig_layout"]
    known["m1"]["mig_layout"]["3g.40gb"] = 1  # type: ignore[index]
    assert known["m2"]["mig_layout"] == {"3g.40gb": 2}


def test_read_nodes_describes_every_node_as_the_sync_s_known_nodes_do(pool: Pool) -> None:
    # The first refresh reads every node; with ``inventory`` it also describes each as the
    # sync compares it with the cluster, so the first sync does not read the nodes again.
    mig = pool.flavors["a100-3g.40gb"]
    node("m2", mig, gpus=2, mig_layout={"3g.40gb": 2}, zone="z1", labels={"a": "b"})
    node("m3", mig, gpus=2, mig_layout={"1g.10gb": 1, "3g.40gb": 1}, cluster_exclusion="gone")
    Node.objects.filter(name="m3").update(gone_at=NOW)
    Gpu.objects.filter(node__name="m2", index=0).update(
        healthy=False, unhealthy_reason=CLUSTER_UNHEALTHY
    )
    Gpu.objects.filter(node__name="m3", index=1).update(healthy=False, unhealthy_reason="admin")
    flavors = {f.pk: f for f in Flavor.objects.all()}
    inventory: dict[str, dict[str, object]] = {}
    nodes, ids = read_nodes(flavors, inventory=inventory)
    assert (nodes, ids) == read_nodes(flavors)
    known = ControlLoop._known_nodes(ControlLoop.__new__(ControlLoop), None)
    assert inventory == known
    assert (inventory["m2"]["unhealthy_in_cluster"], inventory["m3"]["gone"]) == (1, True)
    assert inventory["m2"]["labels"] == {"a": "b"}
    assert inventory["m1"]["mig_layout"] is not inventory["m2"]["mig_layout"]


def test_the_nodes_inventory_stays_as_the_database_has_them_through_refreshes(
    pool: Pool,
) -> None:
    """A refresh that read every node describes them for the sync (``node_inventory``); the
    refreshes after it, reading only the nodes changed since, keep that description as the
    database has the nodes (a warm-up's read serves the first cycle's sync)."""
    state = LoopState(POLICY)
    state.refresh(NOW)
    known = ControlLoop._known_nodes(ControlLoop.__new__(ControlLoop), None)
    assert state.node_inventory == known
    node = Node.objects.get(name="n1")
    Node.objects.filter(pk=node.pk).update(
        labels={"zone-of": "elsewhere"}, zone="z9", updated_at=timezone.now()
    )
    state.refresh(NOW)  # reads the nodes changed since
    known = ControlLoop._known_nodes(ControlLoop.__new__(ControlLoop), None)
    assert known["n1"]["zone"] == "z9"
    assert state.node_inventory == known


def test_pod_set_resources_computed_by_the_database_equal_pod_set_info_s(pool: Pool) -> None:
    # On PostgreSQL ``pod_set_infos`` reads CPU in milli-CPU and memory in MiB as computed by
    # the server (rounding half away from zero); ``pod_set_info`` rounds half to even. They
    # agree on every value the columns hold (three decimals): none is half-way.
    pod_sets = list(PodSet.objects.filter(workload__state__in=LIVE_STATES).order_by("id"))
    rng = random.Random(5)
    values = [Decimal("0.001"), Decimal("0.5"), Decimal("1023.999"), Decimal("99999.999")]
    values += [Decimal(rng.randrange(0, 10**7)) / 1000 for _ in range(4 * len(pod_sets))]
    for step in range(0, len(values), len(pod_sets)):
        batch = values[step : step + len(pod_sets)]
        for pod_set, cpu, memory in zip(pod_sets, batch, reversed(batch), strict=False):
            PodSet.objects.filter(pk=pod_set.pk).update(cpu=cpu, memory_gb=memory)
        expected = {
            p.pk: pod_set_info(p.count, p.gpus, p.gpu_milli, (), p.cpu, p.memory_gb)
            for p in PodSet.objects.filter(pk__in=[p.pk for p in pod_sets])
        }
        read = {pk: info for sets in pod_set_infos().values() for pk, info in sets}
        assert {pk: (i.cpu_milli, i.memory_mib) for pk, i in read.items()} == {
            pk: (i.cpu_milli, i.memory_mib) for pk, i in expected.items()
        }


def test_plain_rows_are_the_rows_django_gives_but_for_json_left_as_text(pool: Pool) -> None:
    rows = Placement.objects.values_list(
        "workload_id", "pod_index", "node__name", "gpu_indices", "milli"
    ).order_by("workload_id", "pod_set_id", "pod_index")
    plain = [
        (*row[:3], json.loads(row[3]) if isinstance(row[3], str) else row[3], row[4])
        for row in plain_rows(rows)
    ]
    assert plain == list(rows)
    assert len(plain) == 7  # every placed pod of the pool
    assert (1, "n1", [6, 7], None) in [row[1:] for row in plain]  # the gang's second worker
    assert list(plain_rows(Placement.objects.filter(pk__in=[]).values_list("id"))) == []


def test_budgets_of_the_current_period_count_spending_and_open_reservations(
    pool: Pool,
) -> None:
    budgets = {(b.tenant, b.priority_class): b for b in built().snapshot.budgets}
    assert set(budgets) == {("a", "high"), ("b", "high")}  # tenant c owns no queue
    # October's 1000 GPU-hours are not November's; spent 2.5, reserved 10, settled 4.
    assert (budgets[("a", "high")].gpu_hours, budgets[("a", "high")].used) == (100.0, 8.5)
    assert budgets[("a", "high")].remaining == float(
        pool.workloads["default/gang"].budget_entries.first().budget.remaining_gpu_hours()
    )
    assert budgets[("b", "high")].used == 0.0


def test_the_preemption_history_covers_the_contracts_horizon_up_to_now(pool: Pool) -> None:
    history = built().snapshot.preemption_history
    assert history == (
        PreemptionEventInfo(
            at=minutes_before_now(45).timestamp(),
            victim="default/victim",
            preemptor="default/preemptor",
            preemptor_tenant="a",
        ),
        PreemptionEventInfo(at=minutes_before_now(35).timestamp(), victim="default/gang"),
    )
    no_contracts = PolicyInfo(backoff=None, victim_protection=None)
    assert build_snapshot(now=NOW, policy=no_contracts).snapshot.preemption_history == ()


def test_database_snapshot_and_scenario_file_agree_and_plan_alike(pool: Pool) -> None:
    database = built()
    text = json.dumps(snapshot_to_dict(database.snapshot, POLICY, database.now))
    loaded = scenario_from_dict(json.loads(text))
    assert loaded.snapshot == database.snapshot
    assert (loaded.policy, loaded.now) == (POLICY, database.now)
    from_database = plan(database.snapshot, POLICY, database.now)
    assert plan(loaded.snapshot, loaded.policy, loaded.now) == from_database
    # The plan decides something of each kind: a MIG slice and a milli share admitted, the
    # gang evicted for rush, the nominated preemptor waiting for its victim.
    assert [a.workload for a in from_database.admit] == [
        "default/small-notebook",
        "default/small-slice",
    ]
    assert [(e.workload, e.preemptor) for e in from_database.evict] == [
        ("default/gang", "default/rush")
    ]
    reasons = {p.workload: p.reason for p in from_database.pending}
    assert reasons["default/preemptor"] == "waiting-for-preemption"


@pytest.mark.parametrize("extra", [0, 30], ids=["small pool", "larger pool"])
def test_the_builder_reads_a_fixed_number_of_queries_whatever_the_pool_size(
    pool: Pool, extra: int, django_assert_max_num_queries: Callable[..., Any]
) -> None:
    add_pool(extra)
    with django_assert_max_num_queries(QUERIES):
        database = built()
    assert len(database.snapshot.workloads) == 10 + 2 * extra


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_reads_take_one_of_their_own() -> None:
    """On PostgreSQL a read-only repeatable-read one; the same snapshot as inside the caller's."""
    with transaction.atomic():
        build_pool()
        inside = built()
    with CaptureQueriesContext(connection) as done:
        outside = built()
    assert outside == inside
    statements = [query["sql"] for query in done.captured_queries]
    assert sum(sql.startswith("SELECT") for sql in statements) == QUERIES
    if connection.vendor == "postgresql":
        assert statements[:2] == [
            "BEGIN",
            "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
        ]
