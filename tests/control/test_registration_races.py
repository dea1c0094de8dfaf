"""A workload name taken between the loop's sync and its write of a registration.

Pods made with kubectl are registered as workloads by the loop: the sync decides, then a
transaction writes the registration -- on PostgreSQL the cycle's record
(``do_record_cycle(registrations=...)``), elsewhere the sync's own one by one when the bulk
path fails (``do_record_cluster_sync`` -> ``do_submit_workload``). A workload of the same
namespace and name submitted through the API in between makes the insert fail on the unique
constraint (``workload_unique_namespace_name``): that registration is left out, with a
warning, and the rest of the cycle is recorded; the API's workload is left as it is.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from django.db import IntegrityError, connection
from django.db.models import Max, QuerySet
from loop_builders import World, build_world

from gpupool.accounting.models import PreemptionEvent
from gpupool.audit.models import AuditEvent
from gpupool.clusters.grouping import WorkloadKey
from gpupool.control import actions as actions_module
from gpupool.control import loop as loop_module
from gpupool.control.actions import (
    PendingRegistrations,
    Registered,
    RegistrationPolicy,
    _check_registrations,
    defer_registrations,
    do_record_cluster_sync,
    do_record_cycle,
)
from gpupool.control.models import SchedulingCycle
from gpupool.control.record import (
    AdmissionRecord,
    CycleRecord,
    EvictionRecord,
    Explanation,
    PodPlace,
)
from gpupool.control.sync import PodSetShape, Registration, SyncDecision
from gpupool.inventory.models import Flavor, Node
from gpupool.quotas.actions import BudgetMove, do_grant_budget
from gpupool.quotas.models import BudgetLedgerEntry, PriorityClass
from gpupool.workloads.choices import WorkloadState
from gpupool.workloads.models import PodSet, Workload, WorkloadExplanation

pytestmark = pytest.mark.django_db

AT = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def world(db: None) -> World:
    """Two teams, two 8-GPU nodes (written by a first cycle), a loop."""
    world = build_world()
    world.cycle()
    return world


def _registration(world: World, name: str) -> Registration:
    """A kubectl pod's workload of one 1-GPU pod in ``team-a``, as the sync decides it."""
    shape = PodSetShape("set-0", 1, 1, (world.h100.pk,), None, Decimal(1), Decimal(1))
    return Registration(
        WorkloadKey("team-a", name), "team-a", None, (shape,), "bare", AT, None, "", None, None
    )


def _deferred(registrations: list[Registration]) -> PendingRegistrations:
    """The registrations checked and given ids, not written: on PostgreSQL as the loop's sync
    leaves them (``defer_registrations``: ids from the sequences); elsewhere, which defers
    none, with ids past the tables' own."""
    flavors = {f.pk: f for f in Flavor.objects.all()}
    policy = RegistrationPolicy.read()
    if connection.vendor == "postgresql":
        pending, slow = defer_registrations(registrations, flavors, AT, policy)
        assert pending is not None and slow == []
        return pending
    checked, slow = _check_registrations(registrations, flavors, policy)
    assert slow == []
    workload = (Workload.objects.aggregate(top=Max("pk"))["top"] or 0) + 100
    pod_set = (PodSet.objects.aggregate(top=Max("pk"))["top"] or 0) + 100
    return PendingRegistrations(
        checked,
        [workload + i for i in range(len(checked))],
        [(pod_set + i,) for i in range(len(checked))],
        AT,
    )


def _admission(made: Registered, node: Node, gpu: int, flavor: Flavor) -> AdmissionRecord:
    return AdmissionRecord(
        made.workload_id,
        str(made.registration.key),
        (PodPlace(made.pod_set_ids[0], 0, node.pk, (gpu,), None),),
        ((flavor.pk, Decimal(1)),),
    )


def test_a_registration_whose_name_was_taken_before_the_record_leaves_the_cycle_recorded(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    """The sync decided three registrations; two of their names are taken through the API
    before the record writes them. The record writes the third with its admission, and the
    rest of the plan; of the two, nothing: not their admission, nomination, explanation, rank,
    budget move, nor an eviction for one of them (its victim keeps running)."""
    pending = _deferred([_registration(world, n) for n in ("fresh", "taken", "taken-too")])
    planned = {made.registration.key.name: made for made in pending.unwritten()}
    # Between the sync and the record: the API submits two of the names.
    taken, taken_too = world.submit("taken"), world.submit("taken-too")
    before = {w.pk: w.updated_at for w in (taken, taken_too)}
    victim, other = world.submit("victim"), world.submit("other")
    Workload.objects.filter(pk=victim.pk).update(state=WorkloadState.RUNNING)
    high = PriorityClass.objects.get(name="high")
    PriorityClass.objects.filter(pk=high.pk).update(budget_rate=Decimal(1))
    high.budget_rate = Decimal(1)
    budget = do_grant_budget(
        world.queues["team-a"].tenant,
        high,
        period_start=date(2026, 12, 1),
        period_end=date(2027, 1, 1),
        gpu_hours=100,
        acting_user=None,
    )
    n1 = Node.objects.get(name="n1")
    lost_id, nominee_id = planned["taken"].workload_id, planned["taken-too"].workload_id
    record = CycleRecord(at=AT)
    record.admissions = [
        _admission(planned["fresh"], n1, 0, world.h100),
        _admission(planned["taken"], n1, 1, world.h100),
    ]
    record.evictions = [
        EvictionRecord(victim.pk, "team-a/victim", "preemption", nominee_id, Decimal(1), Decimal(0))
    ]
    record.nominated = {nominee_id: True}
    record.explanations = {
        nominee_id: Explanation("waiting-for-preemption", "waits for its victims", {}),
        other.pk: Explanation("quota", "waits for quota", {"asked": 1}),
    }
    record.new_reasons = set(record.explanations)
    record.ranked = {nominee_id: 1.0, other.pk: 2.0}
    record.ranks = dict(record.ranked)
    record.pending_by_reason = {"waiting-for-preemption": 1, "quota": 1}
    moves = [
        BudgetMove(budget.pk, "reserve", Decimal(-1), made.workload_id, "protected window")
        for made in (planned["fresh"], planned["taken"])
    ]
    registered: list[Registered] = []
    lost: list[Registered] = []
    with caplog.at_level(logging.WARNING, logger="gpupool.control.actions"):
        cycle = do_record_cycle(
            record,
            started_at=AT,
            nodes=2,
            workloads=5,
            budget_moves=moves,
            registrations=pending,
            registered=registered,
            lost=lost,
        )
    cycle = SchedulingCycle.objects.get(pk=cycle.pk)
    assert (cycle.error, cycle.admitted, cycle.evicted) == ("", 1, 0)
    fresh = world.workload("fresh")
    assert (fresh.pk, fresh.origin, fresh.state) == (
        planned["fresh"].workload_id,
        "bare",
        WorkloadState.ADMITTED,
    )
    assert fresh.placements.count() == 1
    assert [m.registration.key.name for m in registered] == ["fresh"]
    assert sorted(m.registration.key.name for m in lost) == ["taken", "taken-too"]
    assert [a.workload_id for a in record.admissions] == [fresh.pk]  # the record says so too
    assert set(record.explanations) == set(record.ranked) == {other.pk}
    assert not record.evictions and not record.nominated
    # The API's workloads are as the API made them.
    for api in (taken, taken_too):
        now = Workload.objects.get(pk=api.pk)
        assert (now.origin, now.state, now.nominated) == ("gpupool", WorkloadState.PENDING, False)
        assert now.updated_at == before[api.pk]
        assert not now.placements.exists()
        assert not WorkloadExplanation.objects.filter(workload=api).exists()
    assert not Workload.objects.filter(pk__in=[lost_id, nominee_id]).exists()
    assert Workload.objects.get(pk=victim.pk).evicting_for_id is None
    assert not PreemptionEvent.objects.exists()
    assert WorkloadExplanation.objects.get(workload=other).queue_rank == 2.0
    assert list(BudgetLedgerEntry.objects.filter(kind="reserve").values_list("workload_id")) == [
        (fresh.pk,)
    ]
    (audit,) = AuditEvent.objects.filter(action="control.register_workloads")
    assert audit.after["names"] == ["team-a/fresh"]
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "team-a/taken, team-a/taken-too" in warning.getMessage()


def test_a_record_whose_registrations_fail_for_another_reason_still_fails_whole(
    world: World,
) -> None:
    """Only a name taken is left out: an insert refused for anything else (here a drawn id
    that a row holds) fails the record, as ever."""
    pending = _deferred([_registration(world, "fresh")])
    holder = world.submit("holder")
    clash = dataclasses.replace(pending, workload_ids=[holder.pk])
    with pytest.raises(IntegrityError):
        do_record_cycle(
            CycleRecord(at=AT), started_at=AT, nodes=2, workloads=1, registrations=clash
        )
    assert not Workload.objects.filter(name="fresh").exists()


@contextmanager
def _checks_blind() -> Iterator[None]:
    """``do_submit_workload``'s checks of a name as they run before another transaction's
    workload of that name commits: they do not see it (the ``exists()`` and ``full_clean``'s
    constraint check), the insert does."""
    exists, full_clean = QuerySet.exists, Workload.full_clean
    name = Workload._meta.get_field("name")

    def blind_exists(self: QuerySet[Any]) -> bool:
        lookups = self.query.where.children
        by_name = any(getattr(getattr(c, "lhs", None), "target", None) is name for c in lookups)
        return False if self.model is Workload and by_name else exists(self)

    def blind_clean(self: Workload, *args: Any, **kwargs: Any) -> None:
        full_clean(
            self, *args, **{**kwargs, "validate_unique": False, "validate_constraints": False}
        )

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(QuerySet, "exists", blind_exists)
        patch.setattr(Workload, "full_clean", blind_clean)
        yield


def _submitting_blind(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registrations' slow path submits with ``_checks_blind``."""
    submit = actions_module.do_submit_workload

    def blind(*args: Any, **kwargs: Any) -> Workload:
        with _checks_blind():
            return submit(*args, **kwargs)

    monkeypatch.setattr(actions_module, "do_submit_workload", blind)


def test_a_slow_registration_whose_name_is_taken_between_its_check_and_its_insert_is_refused(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bulk path fails on the taken name and each goes one by one; the taken one's
    insert fails on the constraint its checks did not see: it alone is refused, with a
    complaint naming it, and the others are registered."""
    decision = SyncDecision(
        at=AT, registrations=[_registration(world, n) for n in ("fresh-0", "taken", "fresh-1")]
    )
    api = world.submit("taken")  # after the sync decided
    _submitting_blind(monkeypatch)
    complaints = do_record_cluster_sync(decision)
    assert len(complaints) == 1
    assert complaints[0].startswith("team-a/taken: refused by the database: ")
    made = Workload.objects.filter(name__startswith="fresh").order_by("name")
    assert [(w.name, w.origin) for w in made] == [("fresh-0", "bare"), ("fresh-1", "bare")]
    now = Workload.objects.get(namespace="team-a", name="taken")
    assert (now.pk, now.origin, now.updated_at) == (api.pk, "gpupool", api.updated_at)
    assert now.transitions.count() == 1


def test_the_loop_logs_a_registration_refused_so_and_its_cycle_succeeds(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The same race in the loop (whose sync writes the registrations itself: not
    PostgreSQL): the cycle succeeds, the other pod's workload is admitted and bound, and a
    warning names the refused one."""
    if connection.vendor == "postgresql":
        pytest.skip("the record writes the registrations there (the next test)")
    world.cluster.add_pod("solo-0", workload="solo")
    clash = world.cluster.add_pod("clash-0", workload="clash")
    record_sync = loop_module.do_record_cluster_sync

    def raced(decision: SyncDecision, **options: Any) -> list[str]:
        world.submit("clash")  # the API, between the sync's decision and its write
        return record_sync(decision, **options)

    monkeypatch.setattr(loop_module, "do_record_cluster_sync", raced)
    _submitting_blind(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="gpupool.control.loop"):
        world.cycle()
    assert world.workload("solo").state == WorkloadState.ADMITTED
    assert world.workload("clash").origin == "gpupool"
    assert world.cluster.pods[clash].node_name is None
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("could not register a workload: team-a/clash: refused by the")


def test_the_loop_records_a_cycle_whose_registration_lost_its_name_and_reads_all_again(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On PostgreSQL the record writes the sync's registrations: a name the API takes between
    the two is left out, the cycle succeeds with the rest of its plan recorded, nothing of
    this cycle is applied (the apply was prepared on the workload left out), and the loop
    forgets its state: the next cycle reads everything again and binds what was admitted."""
    if connection.vendor != "postgresql":
        pytest.skip("the sync writes the registrations elsewhere (the test before)")
    world.cluster.add_pod("solo-0", workload="solo")
    clash = world.cluster.add_pod("clash-0", workload="clash")
    decide = loop_module.decide_record

    def raced(*args: Any, **options: Any) -> Any:
        world.submit("clash")  # the API, between the sync and the record
        return decide(*args, **options)

    monkeypatch.setattr(loop_module, "decide_record", raced)
    with caplog.at_level(logging.WARNING):
        result = world.cycle()
    monkeypatch.setattr(loop_module, "decide_record", decide)
    assert result.counts["admitted"] == 1 and result.admitted == ["team-a/solo"]
    cycle = SchedulingCycle.objects.get(pk=result.cycle_id)
    assert (cycle.status, cycle.error, cycle.admitted) == ("succeeded", "", 1)
    assert world.workload("solo").state == WorkloadState.ADMITTED
    api = world.workload("clash")
    assert (api.origin, api.state) == ("gpupool", WorkloadState.PENDING)
    assert any("team-a/clash" in r.getMessage() for r in caplog.records)
    assert world.loop.first  # forgotten: read again whole
    assert world.cluster.pods[clash].node_name is None
    assert all(p.node_name is None for p in world.cluster.pods_of("solo"))  # not applied yet
    world.cycle()
    assert all(p.node_name for p in world.cluster.pods_of("solo"))
    assert Workload.objects.get(pk=api.pk).origin == "gpupool"


def test_every_part_of_a_cycle_record_is_known_to_what_leaves_a_registration_out() -> None:
    """``actions._leave_out`` takes out what names a workload left out; a new part of
    ``CycleRecord`` must be looked at there (does it name workloads?)."""
    assert {f.name for f in dataclasses.fields(CycleRecord)} == {
        "at",
        "admissions",
        "evictions",
        "nominated",
        "explanations",
        "new_reasons",
        "ranks",
        "ranks_whole",
        "ranked",
        # Names no workload: the positions counted in it are told by the apply alone, which
        # a cycle that left a registration out does not run (the next reads all again).
        "ranks_by_queue",
        "pending_by_reason",
        "idle_alerts",
        "growths",
    }
