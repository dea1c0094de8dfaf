"""The control loop: one scheduling cycle = sync -> snapshot -> plan -> record -> apply.

``ControlLoop`` keeps what a cycle needs between cycles (the database as the core sees it,
``state.LoopState``; the cluster's pods and nodes, ``cluster.ClusterMirror``; explanations as
last written; victims a disruption budget refused) and runs cycles on any ``ClusterBackend``:
it never asks which one (STYLE 11). ``docs/control-loop.md`` explains each step, how it fails
and what the next cycle does about it.

1. **sync** -- ``backend.sync()``; the delta goes into the mirror; ``sync.decide_*`` decide
   what the database must learn (nodes, new workloads, pod-driven transitions, checkpoints),
   ``do_record_cluster_sync`` writes it, then its Events are emitted.
2. **snapshot** -- the state re-reads what changed since its last read (unless the sync's
   own read, moments before, and what the sync wrote and put into the state are all there is:
   a burst's new workloads and its pods' starts) and assembles the core's snapshot, with what
   the cluster adds (missing pods, allowed nodes, other schedulers' usage, refused victims'
   protection).
3. **plan** -- ``plan(snapshot, policy, now)``; the snapshot is kept (``latest``) for the
   estimated starts, which ``refresh_estimates`` computes between cycles (``estimates.py``).

The whole cycle runs with the garbage collector paused: the state holds hundreds of
thousands of objects at B1's size, and each full collection in a cycle walked them all.
4. **record** -- ``record.decide_record`` then ``do_record_cycle``: one transaction; while
   the server writes its admissions, the apply is prepared (``_prepare_apply``: no database,
   nothing of the loop changed until the commit).
5. **apply** -- after the commit: create, bind, evict, delete and explain, from the
   database's state and the cluster's pods (``apply.py``); its outcome is recorded, and the
   cycle row gets its timings, counts and running totals (for ``/metrics``).

**The pipeline** (``run_cycle(pipeline=True)``: the in-process loop, on a backend whose
``concurrent_apply`` allows it): a cycle whose apply has bindings hands that apply to a thread
of its own and ends; the next cycle syncs, snapshots and plans while the bindings are in
flight, and waits for them (``apply_wait``) before it records. The workloads being bound are
admitted in the database and in the state, so the next plan sees their GPUs as taken: nothing
is promised twice. When the apply taught something (a gang that could not be bound goes back
to pending, a disruption budget refused a victim set) the outcome is recorded first and the
cycle snapshots and plans again on it. The cycle lock stays held while an apply is in flight
(``finish_apply`` waits for it and lets go), so one cycle at a time still holds cluster-wide.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import math
import re
import time
import traceback
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import chain
from typing import Any

from django.db.models import Count, Q
from django.utils import timezone

from gpupool.clusters.base import (
    ClusterBackend,
    ClusterUnavailable,
    ClusterView,
    EventRequest,
    PodFacts,
    PodKey,
    PodRef,
)
from gpupool.clusters.grouping import WorkloadKey, WorkloadRequest
from gpupool.control import metrics
from gpupool.control.actions import (
    PendingRegistrations,
    Registered,
    RegistrationPolicy,
    Stamps,
    defer_registrations,
    do_finish_cycle,
    do_record_apply_outcome,
    do_record_cluster_sync,
    do_record_cycle,
    do_start_cycle,
)
from gpupool.control.apply import (
    CREATES_PER_CYCLE,
    EVENTS_PER_CYCLE,
    ApplyOutcome,
    ApplyWork,
    PodSetRun,
    WorkloadRun,
    added_bindings,
    cancel_pods,
    drain_words,
    gang_bindings,
    gpu_resource,
    key_of,
    new_pods,
    pods_by_set,
    queued_explanations_due,
    run_apply,
)
from gpupool.control.budgets import BudgetBook, held_gpus, named, window_at_stake
from gpupool.control.choices import CycleStatus
from gpupool.control.cluster import ClusterMirror, holds_node, is_live, made_by_gpupool
from gpupool.control.estimates import EstimateRefresher, EstimateRun, Planned
from gpupool.control.learning import Expected, RuntimeHistory
from gpupool.control.lock import cycle_lock, read_lock
from gpupool.control.models import SchedulingCycle
from gpupool.control.record import (
    FACTS_REFRESH_S,
    CycleRecord,
    Explanation,
    acted_on,
    decide_record,
)
from gpupool.control.snapshot import (
    DatabaseSnapshot,
    WorkloadRow,
    core_topology,
    id_list,
    info_with,
    json_of,
    name_list,
    own_layout,
    plain_rows,
)
from gpupool.control.state import LoopState, stepped
from gpupool.control.sync import (
    CLUSTER_UNHEALTHY,
    Known,
    Shrink,
    SyncDecision,
    SyncMemory,
    decide_nodes,
    decide_workloads,
    moment,
    note_departed,
    shape_info,
    with_foreign_usage,
)
from gpupool.inventory.actions import do_record_drained, do_record_foreign_usage
from gpupool.inventory.models import Gpu, Node
from gpupool.inventory.queries import fragmentation_sample
from gpupool.notifications.choices import WorkloadEvent
from gpupool.notifications.notify import notify_idle_workload, notify_workload_event
from gpupool.number_formats import counted
from gpupool.runtime import gc_paused
from gpupool.scheduler.cycle import plan_of, run_cycle
from gpupool.scheduler.cycle_state import Cycle
from gpupool.scheduler.explain import flavor_units, never_fits
from gpupool.scheduler.lifecycle import apply_plan
from gpupool.scheduler.shares import QueueShare, queue_shares
from gpupool.scheduler.types import MILLI, Admission, Plan, PolicyInfo, Snapshot, WorkloadInfo
from gpupool.utilization.sampling import IdleWrite, UtilizationSampler, source_for
from gpupool.workloads.choices import Origin, WorkloadState
from gpupool.workloads.models import PodSet, Workload
from gpupool.workloads.queries import TeamSees, says_position, sentence, sentence_seen_by

logger = logging.getLogger(__name__)

PHASES = ("sync", "snapshot", "plan", "record", "apply")
REFUSAL_BACKOFF_S = 60.0  # a victim a disruption budget protected is not chosen again for this
EVICT_RESEND_S = 30.0  # an eviction sent is not sent again sooner (its pods are leaving)
# An elastic gang whose growth could not be bound is not grown again sooner (cluster time):
# the same refusal, cycle after cycle, wrote a growth and its undoing each time.
GROW_RETRY_S = 60.0
# The cause the API (and the simulated cluster) gives when a disruption budget refuses.
BUDGET_CAUSE = re.compile(r"The disruption budget (\S+) needs (.*)$")
ONE_HEALTHY_PODS = re.compile(r"^(1) healthy pods\b(.*)$")
CORDON_RESEND_S = 30.0  # a node's cordon asked is not asked again sooner (the watch shows it)
# The fragmentation figures go into a cycle's record at most this often (cluster time): a
# sample for the dashboard's trend, about 40 ms at B1's 5,000 nodes in pure Python.
FRAGMENTATION_SAMPLE_S = 60.0
# A waiting pod's Event is sent when its reason is new, and again when the explanation's
# numbers moved and the last Event is this old (``ControlLoop._stale_events``, looked at this
# often): ``kubectl describe pod`` never reads ten-minute-old figures as today's.
EVENT_REFRESH_S, EVENT_RECHECK_S = 300.0, 30.0
# Pods gpupool will not schedule (a queue of another tenant, a malformed label, a namespace no
# tenant owns...) are named in each cycle's record, at most this many (``_refused_pods``).
REFUSED_PODS_KEPT = 100
# The image of a pod set that names none (a placeholder that runs nothing: on the local plane
# and the simulated cluster the pods only need to exist).
DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"


@dataclass(frozen=True)
class HandedOn:
    """An apply running beside the next cycle (the pipeline), and the cluster time it was
    decided at."""

    outcome: Future[ApplyOutcome]
    now: float
    work: ApplyWork


@dataclass
class PreparedApply:
    """A cycle's apply as prepared while its record is written (``_prepare_apply``), nothing
    of it taken into the loop yet: the loop takes it after the record's commit
    (``_remember_written``, then ``_apply``). A record that fails leaves it unused: nothing
    reaches the cluster, and the loop is as it was."""

    rows: dict[str, WorkloadRow]  # name -> its row as the record writes it
    work: ApplyWork  # the bindings, evictions and Events to send
    outstanding: set[str]  # workloads whose apply is not confirmed yet: looked at next cycle
    sent: dict[str, float]  # victims whose eviction goes out now -> when
    explained: list[str]  # taken from the explanation queue (their Events are in ``work``)
    fresh: dict[str, str]  # workloads whose reason is new -> sentence: queued last
    runs_wanted: list[WorkloadRow]  # pods to create (their pod sets are read after the commit)
    unknown: dict[str, list[Any]]  # pods of workloads without a row: deleted if cancelled
    # Running elastic gangs grown (``Plan.grow``) whose added pods are not all on their nodes.
    growing: set[str] = field(default_factory=set)


@dataclass
class CycleResult:
    """One cycle as the commands print it and the tasks return it."""

    status: str
    cycle_id: int | None = None
    started_at: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    admitted: list[str] = field(default_factory=list)
    evicted: list[dict[str, str | None]] = field(default_factory=list)
    pending: dict[str, int] = field(default_factory=dict)
    error: str = ""
    # The CPU the cycle's own thread spent, start to end (its wall time less this is waiting:
    # for the database, for the cluster, for a core, for the last cycle's bindings).
    cpu_s: float = 0.0

    def as_json(self) -> dict[str, Any]:
        """The record as JSON data."""
        return {
            "status": self.status,
            "cycle": self.cycle_id,
            "started_at": self.started_at,
            "timings_s": {k: round(v, 4) for k, v in self.timings.items()},
            "cpu_s": round(self.cpu_s, 4),
            "counts": dict(self.counts),
            "admitted": self.admitted,
            "evicted": self.evicted,
            "pending": self.pending,
            "error": self.error,
        }


def idle_message(idle_since: datetime, reclaim_at: datetime | None) -> str:
    """The Event an idle workload's pods get: since when, and when it is reclaimed."""
    text = f"its GPUs have done no work since {idle_since.isoformat(timespec='seconds')}"
    if reclaim_at is None:
        return text
    return text + (
        f"; if they stay idle it is reclaimed at {reclaim_at.isoformat(timespec='seconds')}"
        " and ends"
    )


def refused_budget(why: str, namespace: str) -> tuple[str, str]:
    """The disruption budget that refused an eviction, as ``namespace/name``, and what it
    needs ("1 healthy pod and has 1 currently"), from the cause the API gives (``why``:
    the apply's); empty strings where the cause names none. The API server says "needs 1
    healthy pods": one pod is said in the singular here (the Event, the API, CLI and pages)."""
    found = BUDGET_CAUSE.search(why)
    if found is None:
        return "", ""
    needs = ONE_HEALTHY_PODS.sub(r"\1 healthy pod\2", found.group(2).strip().rstrip("."))
    return f"{namespace}/{found.group(1)}", needs


def refusal_words(why: str, namespace: str, reason: str = "") -> str:
    """A disruption budget's refusal of an eviction in words for the pods' Event: the budget
    by namespace and name, from the cause the API gives ("The disruption budget guard needs
    1 healthy pods and has 1 currently"), and that gpupool retries (``why``: the apply's)."""
    budget, needs = refused_budget(why, namespace)
    budget = f"PodDisruptionBudget {budget}" if budget else "a disruption budget"
    needs = f", which needs {needs}" if needs else ""
    kind = {"admin": " (a drain)", "preempt": " (a preemption)", "reclaim": " (a reclaim)"}
    return (
        f"Eviction{kind.get(reason, '')} refused by {budget}{needs}; retried while gpupool "
        "still wants the pod evicted."
    )


class ControlLoop:
    """Runs scheduling cycles against one cluster backend, keeping its state in between."""

    def __init__(self, backend: ClusterBackend, *, policy: PolicyInfo | None = None) -> None:
        self.backend = backend
        self.policy = policy or PolicyInfo()
        self.state = LoopState(self.policy)
        self.mirror = ClusterMirror()
        self.memory = SyncMemory()
        self.written: dict[int, Explanation] = {}
        self.written_at: dict[int, float] = {}
        self.explain_queue: dict[str, str] = {}  # workload -> sentence to put on its pods
        # The sentence each waiting workload's pods were last told, and when (monotonic): a
        # sentence whose numbers moved since is told again once EVENT_REFRESH_S have passed
        # (``_stale_events``), as kube-scheduler repeats FailedScheduling on each retry.
        self.evented: dict[str, tuple[str, float]] = {}
        self.events_checked_at = -math.inf
        self.refused_until: dict[str, float] = {}
        # Workloads left out of the snapshot because their pods ask what no node could hold
        # (``sync._refused``): workload id -> what is wrong, explained as such by the record.
        self.too_large: dict[int, str] = {}
        # Workloads left out because their pods' gpupool.io labels or annotations cannot be
        # used (``sync._pending``): workload id -> what is wrong, explained as such.
        self.malformed: dict[int, str] = {}
        self.evictions_sent: dict[str, float] = {}
        # What each victim's pods were told of its refused eviction (``_tell_refusals``).
        self.refusals_told: dict[str, str] = {}
        # Workloads whose row holds a refused eviction (``Workload.eviction_refusal``), cleared
        # once an eviction is accepted or no longer wanted (``_settle``); None until read
        # (once, at the first apply settled).
        self.refusals_recorded: set[str] | None = None
        # Nodes whose cordon in the cluster was asked for (``_push_cordons``): name -> (the
        # cordon asked, when: monotonic; inf: settled, not asked again while it stays so).
        self.cordons_sent: dict[str, tuple[bool, float]] = {}
        self.outstanding: set[str] = set()  # workloads whose apply is not confirmed yet
        # Running elastic gangs grown (``Plan.grow``) whose added pods the cluster does not
        # show on their nodes yet: bound by apply, and left out of the sync meanwhile
        # (``_decide_sync``), which would take the placements no pod holds for lost members.
        self.growing: set[str] = set()
        # Elastic gangs whose growth's binding failed -> not grown again before (cluster time).
        self.grow_failed_until: dict[str, float] = {}
        self.budgets = BudgetBook()
        self.runtimes = RuntimeHistory()
        self.learned: set[str] = set()  # workloads whose expected runtime was learned
        # Each workload's learned runtime as last looked up, for the same info and the same
        # history (``RuntimeHistory.version``, the last item): not looked up again every cycle
        # (and until when it holds: ``Expected.until``), with the workload as the snapshot
        # takes it when that is the row's own with the answer put in (kept, not made anew
        # every cycle for the thousands of running workloads past a declared end; kept too
        # when an answer looked up again, the history having moved, gives the same runtime).
        self._medians: dict[str, tuple[WorkloadInfo, Expected, WorkloadInfo | None, int]] = {}
        # Placed work's declared ends, soonest first (``_declared_passed``), the placed names
        # looked at, and those whose declared end has come.
        self._declared_ends: list[tuple[float, str]] = []
        self._declared_watched: set[str] = set()
        self._declared_past: set[str] = set()
        self._declared_due: dict[str, float] = {}  # name -> its entry in the heap
        self.facts_cache: dict[int, tuple[Mapping[str, object], dict[str, object]]] = {}
        # The queue ranks as the database holds them since this loop's last record (cycle
        # ``ranked_in``); None when unknown: the next record writes them all.
        self.ranks: dict[int, float] | None = None
        self.ranked_in = 0
        # The counters this loop's last cycle row carries (``metrics``), while no other process
        # has recorded a cycle since (as for ``ranks``); None: read them from the last row.
        self.totals: dict[str, Any] | None = None
        self.latest: Planned | None = None  # what the last cycle planned on (the estimates')
        self.estimates = EstimateRefresher(self.policy)
        self.fragmentation_sampled_at = -math.inf  # cluster time of the last sample
        self.first = True
        # Other schedulers' usage as the nodes' rows hold it (``_record_foreign_usage``): name
        # -> ``ResourceAmounts.as_json``; None until read.
        self.foreign_recorded: dict[str, dict[str, object]] | None = None
        self.utilization = UtilizationSampler(source_for(backend))
        self.handed_on: HandedOn | None = None  # the last cycle's apply, still running
        # Pods bound by an apply that the mirror does not show bound yet: key -> (uid, node)
        # (the next cycle synced while their binding was in flight: not bound again).
        self.bound: dict[PodKey, tuple[str, str]] = {}
        self._applier: ThreadPoolExecutor | None = None
        self._kept_lock: contextlib.ExitStack | None = None  # held while an apply runs
        # Workloads whose pods changed while their apply was in flight: synced next cycle.
        self._held_back: set[WorkloadKey] = set()
        # The namespaces' tenants as this cycle's sync read them (namespace -> tenant).
        self._namespaces: dict[str, str] = {}
        self._warmed_s: float | None = None  # the last warm-up's time, for the next cycle

    # -- the cycle ------------------------------------------------------------------------

    def run_cycle(self, *, dry_run: bool = False, pipeline: bool = False) -> CycleResult:
        """One cycle under the cluster-wide lock, the garbage collector paused; skipped (and
        said so) when another runs. With ``pipeline`` its apply may go on after it returns
        (``HandedOn``): the next cycle, or ``finish_apply``, waits for it, and the lock stays
        held until then.

        It never raises: a fault outside the cycle's own phases (the warm-up's read, taking
        the lock, writing the row of a skipped or failed cycle: a database that is gone or,
        on SQLite, locked by a writer) is logged and answered as a failed cycle with no row,
        and the loop reads everything again the next time, as after any failed cycle. The
        loop that runs cycles one after another (``runner.run_forever``: ``gpupool loop`` and
        the demo) thus goes on; it ended with the demo's every process on a "database is
        locked" raised while a failed cycle was being recorded."""
        try:
            return self._run_cycle(dry_run=dry_run, pipeline=pipeline)
        except Exception as error:
            logger.exception("scheduling cycle could not run")
            self._forget_everything()
            return CycleResult(
                CycleStatus.FAILED,
                None,
                timezone.now().isoformat(),
                error=f"{error.__class__.__name__}: {error}",
            )

    def _run_cycle(self, *, dry_run: bool, pipeline: bool) -> CycleResult:
        if dry_run:
            self.finish_apply()
            self._warm_up()
            with gc_paused():
                return self._cycle(dry_run=True, pipeline=False)
        self._warm_up()
        lock, self._kept_lock = self._kept_lock, None
        if lock is None:
            lock = contextlib.ExitStack()
            acquired = lock.enter_context(cycle_lock())
        else:
            acquired = True  # kept from the last cycle, whose apply is still running
        try:
            if not acquired:
                now = timezone.now()
                skipped = do_start_cycle(at=now)
                do_finish_cycle(
                    skipped,
                    at=timezone.now(),
                    status=CycleStatus.SKIPPED,
                    error="another scheduling cycle holds the lock",
                )
                return CycleResult(
                    CycleStatus.SKIPPED,
                    skipped.pk,
                    now.isoformat(),
                    error="another scheduling cycle holds the lock",
                )
            with gc_paused():
                result = self._cycle(dry_run=False, pipeline=pipeline)
        finally:
            if self.handed_on is not None:
                self._kept_lock = lock
            else:
                lock.close()
        if result.status == CycleStatus.SUCCEEDED:
            self.read_utilization(result)
        return result

    def _warm_up(self) -> None:
        """A loop with no state yet (a new process, or after a failed cycle) reads it before
        it takes the cycle lock, as kube-scheduler fills its informers' caches before it
        schedules: the database's whole pool (``LoopState.refresh``) and the cluster's first
        list (``backend.sync``). The cycle that follows, under the lock, is still a first
        cycle -- it looks at every workload and node -- but reads only what changed since
        (another worker's cycles meanwhile included: the state's horizon covers them), so
        the lock is not held for the read (B1-loop: half a second of 30,000 workloads and
        5,000 nodes), and a worker that finds the lock taken is warm when its turn comes.
        Its time goes into the next cycle's ``timings["warm"]``, outside the phases. A
        failure here is forgotten: the cycle reads everything itself and records the error."""
        if self.state.loaded or self.handed_on is not None:
            return
        clock = time.perf_counter()
        try:
            with gc_paused():
                self._take_cluster_view()
                self.state.refresh(moment(self.backend.now()))
        except Exception:
            logger.warning("warming the loop's state failed; the cycle reads it", exc_info=True)
            self._forget_everything()
            return
        self._warmed_s = time.perf_counter() - clock

    def _take_cluster_view(self) -> tuple[ClusterView, set[WorkloadKey], set[str]]:
        """The cluster's changes since the last sync into the mirror; the view, and the
        workloads and nodes its changes touch."""
        view = self.backend.sync()
        keys, nodes = self.mirror.apply(view)
        note_departed(self.memory, view.delta.pods)
        self._forget_seen_bindings(view.delta.pods)
        return view, keys, nodes

    def read_utilization(self, result: CycleResult | None = None) -> bool:
        """The utilisation read, when one is due (``GPUPOOL_UTILIZATION_INTERVAL_S``, once a
        minute): after a cycle, not in it -- its row is finished and the cycle's lock
        released first (with the pipeline, kept only while its bindings are in flight), so
        another worker's cycle need not wait for it -- on a lock of its
        own (one read at a time). It runs in the loop's process because it reads the loop's
        mirror of the cluster's pods and puts the idle spells it writes into the loop's
        state. Its time goes into ``result.timings["utilization"]``; whether a read was due."""
        clock = time.perf_counter()
        try:
            due = self.utilization.due(self.backend.now())
        except Exception:
            due = True  # the read under the lock says what failed
        if not due:  # as it would say under the lock: no lock taken (two queries a cycle)
            return False
        with read_lock() as acquired, gc_paused():
            read = acquired and self._sample_utilization(self.backend.now())
        if read and result is not None:
            result.timings["utilization"] = time.perf_counter() - clock
        return read

    def finish_apply(self) -> None:
        """Wait for an apply handed on by the last cycle, record what it taught, and let the
        cycle lock go (the loop stopping, a dry run, ``close``; a cycle run without the
        pipeline waits for it itself, before its record)."""
        try:
            if self.handed_on is not None:
                try:
                    with gc_paused():
                        self._join_apply()
                except Exception:
                    logger.exception("the apply handed on failed; the next cycle starts over")
                    self._forget_everything()
        finally:
            lock, self._kept_lock = self._kept_lock, None
            if lock is not None:
                lock.close()

    def _cycle(self, *, dry_run: bool, pipeline: bool) -> CycleResult:
        started = timezone.now()
        cpu = time.thread_time()
        timings: dict[str, float] = {}
        if self._warmed_s is not None:  # read before the lock (``_warm_up``): not a phase
            timings["warm"], self._warmed_s = self._warmed_s, None
        result = CycleResult(CycleStatus.RUNNING, started_at=started.isoformat())
        phase = "sync"
        cycle: SchedulingCycle | None = None
        # Workloads the sync registered for the record to write (PostgreSQL): they are in the
        # state from the sync on, so a cycle that fails before its record forgets the state.
        deferred: PendingRegistrations | None = None
        try:
            clock = time.perf_counter()
            self.state.begin_cycle()
            view, keys, nodes = self._take_cluster_view()
            now = self.backend.now()
            at = moment(now)
            decision = self._decide_sync(at, keys, nodes)
            if self.first:
                self.budgets.load(self.state.rows.values(), self.state.snapshot(at).snapshot)
                self.runtimes.load()
            # Whether the snapshot must read the database again after the sync: not when
            # the sync wrote nothing, or only rows the loop put into its state as written.
            reread = self.first
            if not dry_run:
                if decision.writes:
                    leaving = [s.workload_id for s in decision.steps if s.leaves]
                    moves = self.budgets.leave(leaving, now)
                    moves += self.budgets.shrink(decision.shrinks, self.state.rows, now)
                    written: Stamps = {}
                    registered: list[Registered] = []
                    flavors = self.state.flavor_rows  # as the sync's refresh read them
                    policy = self._policy_rows() if decision.registrations else None
                    pending, slow = (
                        defer_registrations(decision.registrations, flavors, at, policy)
                        if policy is not None
                        else (None, [])
                    )
                    rest = replace(decision, registrations=slow)
                    # Nothing but new workloads (a burst's first cycle): no transaction here.
                    complaints = (
                        do_record_cluster_sync(
                            rest,
                            budget_moves=moves,
                            stamps=written,
                            registered=registered,
                            flavors=flavors,
                            policy=policy,
                        )
                        if rest.writes or moves
                        else []
                    )
                    self._learn(decision, now)
                    self._notify(decision)
                    steps_put = self._put_steps(decision, written)
                    self._put_registered(registered)
                    if pending is not None:  # planned on now, written by the record
                        deferred = pending
                        unwritten = pending.unwritten()
                        self._put_registered(unwritten)  # held from the record's commit
                        registered += unwritten
                    for complaint in complaints:
                        logger.warning("could not register a workload: %s", complaint)
                    reread = reread or not (
                        steps_put
                        and len(registered) == len(decision.registrations)
                        and not (moves or decision.nodes or decision.gone)
                        and not (decision.pod_sets or decision.checkpoints or decision.shrinks)
                    )
                self._emit_sync_events(decision)
                self._record_foreign_usage(view.delta.foreign_usage)
            timings["sync"] = time.perf_counter() - clock

            moves = []
            applied: ApplyOutcome | None = None  # the last cycle's apply, if handed on
            while True:
                phase, clock = "snapshot", time.perf_counter()
                if reread:  # else the sync's refresh, moments ago, and what the loop put
                    self.state.refresh(at)
                reread = True  # after an apply handed on taught something: read it
                self._drop_ended_overlays()
                self._overlay_registered(decision, at)
                overlay = self._overlay(now)
                database = self.state.snapshot(at, overlay, leave_out=self.state.excluded)
                moves += self.budgets.leave([e.id for e in self.state.ended], now)
                budgets, spends = self.budgets.with_accrual(database.snapshot.budgets, now)
                snapshot = self._with_cluster_usage(database.snapshot)
                database = replace(database, snapshot=replace(snapshot, budgets=budgets))
                timings["snapshot"] = timings.get("snapshot", 0.0) + time.perf_counter() - clock

                phase, clock = "plan", time.perf_counter()
                finished = run_cycle(database.snapshot, self.policy, now)
                decided = self._possible_growths(plan_of(finished), now)
                shares = queue_shares(finished.quota)
                self.latest = Planned(
                    database.snapshot, now, database.workload_ids, frozenset(self.learned)
                )
                timings["plan"] = timings.get("plan", 0.0) + time.perf_counter() - clock
                if self.handed_on is None:
                    break
                # The pipeline: the last cycle's bindings ran beside this cycle's sync,
                # snapshot and plan; its outcome is recorded before this cycle's record.
                phase, clock = "apply (handed on)", time.perf_counter()
                applied, taught = self._join_apply()
                timings["apply_wait"] = time.perf_counter() - clock
                if not taught:
                    break
                # It changed the database (a gang back to pending, a victim set called
                # off): snapshot and plan again on what it wrote.

            phase, clock = "record", time.perf_counter()
            draining = self._draining()
            record = decide_record(
                database,
                decided,
                self.state.rows,
                at,
                written=self.written,
                written_at=self.written_at,
                refresh_before=time.monotonic() - FACTS_REFRESH_S,
                draining=draining,
                learned=self.learned,
                facts_cache=self.facts_cache,
                ranks=self._known_ranks(),
                too_large=self.too_large,
                malformed=self.malformed,
            )
            result.admitted = sorted(a.name for a in record.admissions)
            result.evicted = [
                {
                    "workload": e.name,
                    "reason": e.reason,
                    "for": None if e.preemptor_id is None else self.state.names.get(e.preemptor_id),
                }
                for e in record.evictions
            ]
            result.pending = dict(sorted(record.pending_by_reason.items()))
            if dry_run:
                # Nothing was written: the next real cycle looks at everything again (this one
                # took the cluster's delta, and the database does not know it yet).
                self.first = True
                timings["record"] = time.perf_counter() - clock
                result.status, result.timings = "dry-run", timings
                result.counts = {
                    "nodes": len(database.snapshot.nodes),
                    "workloads": len(database.snapshot.workloads),
                    "grown": len(record.growths),  # would grow: nothing is recorded
                }
                return result
            if draining:  # which of them are empty now: drained (``Node.state``)
                do_record_drained(self._emptied(draining), at=at)
            self._push_cordons()
            moved = apply_plan(
                acted_on(database.snapshot, decided), decided, now, evictions_take_time=True
            )
            reserved = {a.workload: a.budget_reservation for a in decided.admit}
            moves += self.budgets.spend(spends, now)
            moves += self.budgets.settle_due(now)
            moves += self.budgets.admit(
                [
                    (database.workload_ids[w.name], w, reserved[w.name])
                    for w in named(moved.workloads, reserved)
                ],
                database.snapshot,
                now,
            )
            grown = {growth.workload for growth in decided.grow}
            moves += self.budgets.grow(
                [
                    (database.workload_ids[w.name], held_gpus(w))
                    for w in named(moved.workloads, grown)
                ],
                now,
            )
            stamps: Stamps = {}
            nominations: Stamps = {}
            prepared: list[PreparedApply] = []
            inserted: list[Registered] = []
            lost: list[Registered] = []  # registrations whose name was taken meanwhile

            def prepare() -> None:  # while the server writes the admissions: no database
                try:
                    prepared.append(self._prepare_apply(moved, decided, record, now, keys))
                except Exception:  # prepared again below, after the commit
                    # A fault of the apply's must not undo the record, as it could not
                    # before the preparation moved here: the next cycle completes an apply.
                    logger.exception("the apply's preparation failed; prepared after the commit")

            cycle = do_record_cycle(
                record,
                started_at=started,
                nodes=len(database.snapshot.nodes),
                workloads=len(database.snapshot.workloads),
                budget_moves=moves,
                stamps=stamps,
                quiet_stamps=nominations,
                meanwhile=prepare,
                registrations=deferred,
                registered=inserted,
                lost=lost,
            )
            deferred = None  # written
            # Committed: the loop takes what was prepared, and the cluster hears of it.
            result.cycle_id = self.ranked_in = cycle.pk
            # The rows registered, held as written (before the record's own writes of them).
            self.state.hold({made.workload_id: made.stamp for made in inserted if made.stamp})
            if not prepared:  # its preparation failed during the record: once more, here
                phase = "apply"
                prepared.append(self._prepare_apply(moved, decided, record, now, keys))
                phase = "record"
            self._remember_written(prepared[0], record, stamps, nominations)
            timings["record"] = time.perf_counter() - clock

            phase, clock = "apply", time.perf_counter()
            # Prepared on a registration left out (``lost``): nothing applied this cycle.
            outcome = None if lost else self._apply(prepared[0], now, hand_on=pipeline)
            if lost:
                result.admitted = sorted(a.name for a in record.admissions)
            self._alert_idle(record)
            timings["apply"] = time.perf_counter() - clock
            result.counts = {
                "nodes": len(database.snapshot.nodes),
                "workloads": len(database.snapshot.workloads),
                "admitted": len(record.admissions),
                "grown": len(record.growths),
                "evicted": len(record.evictions),
                "pending": sum(record.pending_by_reason.values()),
                "explained": len(record.explanations),
                "ranked": len(record.ranks),
                "sync_writes": len(decision.steps)
                + len(decision.registrations)
                + len(decision.nodes)
                + len(decision.gone),
                "rows_reread": self.state.reread,
                "rows_held": self.state.skipped,
            }
            # What the applies done in this cycle did: the one handed on by the last cycle
            # (joined above) and this cycle's own, unless it is handed on in turn.
            for done in (applied, outcome):
                for what, amount in (done.counts if done is not None else {}).items():
                    # The apply counts pods; "evicted" counts the workloads evicted.
                    what = "pods_evicted" if what == "evicted" else what
                    result.counts[what] = result.counts.get(what, 0) + amount
            if outcome is not None and outcome.refused:
                # Evictions a disruption budget refused did not happen (called off): a drain
                # retried after each refusal counted one eviction a cycle.
                off = {e.name for e in record.evictions} & outcome.refused.keys()
                result.counts["evicted"] -= len(off)
                result.evicted = [e for e in result.evicted if e["workload"] not in off]
            if self.handed_on is not None:
                result.counts["handed_on"] = len(self.handed_on.work.bind)
            result.status, result.timings = CycleStatus.SUCCEEDED, timings
            phase = "finish"  # recorded and applied: what fails now is the cycle's row
            fragmentation = self._sample_fragmentation(finished, now)
            result.cpu_s = time.thread_time() - cpu
            self._finish(cycle, result, record, database, shares, fragmentation)
            self.first = False
            if lost:  # the next cycle reads everything again, and applies what was recorded
                self._forget_everything()
            if self.state.registration_policy is None and self.state.policy_digest is not None:
                # Read between cycles while the policy tables stay (PostgreSQL), not by the
                # first cycle of the next burst, which registers its pods.
                self._policy_rows()
            return result
        except Exception as error:  # the cycle fails whole; the next one starts over
            logger.exception("scheduling cycle failed in %s", phase)
            message = f"{phase}: {error.__class__.__name__}: {error}"
            if isinstance(error, ClusterUnavailable):
                message = f"sync: the cluster is unavailable: {error}"
            result.status, result.error, result.timings = CycleStatus.FAILED, message, timings
            if not dry_run:
                try:
                    failed = cycle if cycle is not None else do_start_cycle(at=started)
                    do_finish_cycle(
                        failed,
                        at=timezone.now(),
                        status=CycleStatus.FAILED,
                        error=message + "\n" + traceback.format_exc(limit=8),
                        timings=timings,
                        # Counted as failed (the phases it ran in the histograms): the
                        # counters went on from the last row that carried them.
                        totals=metrics.add_to_totals(metrics.carried_totals(), result, None),
                    )
                    result.cycle_id = failed.pk
                except Exception:  # the database failed again: the log keeps the failure
                    logger.exception("the failed cycle could not be recorded")
            joined = True
            if self.handed_on is not None:  # the last cycle's apply: its outcome is recorded
                try:
                    self._join_apply()
                except Exception:
                    logger.exception("the apply handed on failed too")
                    joined = False
            if not isinstance(error, ClusterUnavailable) or not joined or deferred is not None:
                self._forget_everything()
            return result

    def _sample_fragmentation(
        self, finished: Cycle, now: float
    ) -> Mapping[str, Mapping[str, float]] | None:
        """The pool's fragmentation once a minute of cluster time (``FRAGMENTATION_SAMPLE_S``),
        for the cycle's row and the dashboard's trend; None when none is due. Taken after the
        apply, which does not wait for it. A failure is logged and never fails the cycle:
        its decisions are recorded and applied by then, and the next due cycle samples."""
        if now - self.fragmentation_sampled_at < FRAGMENTATION_SAMPLE_S:
            return None
        try:
            sample = fragmentation_sample(finished.cluster, finished.placer.distributions)
        except Exception:
            logger.exception("fragmentation sampling failed; the cycle's row goes without it")
            return None
        self.fragmentation_sampled_at = now
        return sample

    def _sample_utilization(self, now: float) -> bool:
        """Read the GPUs' use since the last read when one is due (gpupool.utilization); a
        failure is logged and never fails the cycle. Whether a read was due."""
        try:
            if not self.utilization.due(now):
                return False
            pods = {pod: key for key, members in self.mirror.pods.items() for pod in members}
            # With the pods as the cluster says them: each one's share of its GPU is its milli.
            sampled = self.utilization.sample(now, pods, self.mirror.pods)
        except Exception:
            logger.exception("utilisation sampling failed")
            return True
        if sampled is not None and sampled.idle:
            self._put_idle(sampled.idle, now)
        return True

    def _put_idle(self, idle: Mapping[int, IdleWrite], now: float) -> None:
        """The idle spells the sampler just wrote, into the state (as ``read_workloads`` gives
        them back: a placed workload's, kept only between its start and ``now``), so the next
        refresh need not read those rows back: at B1's size thousands a read."""
        rows, names = self.state.rows, self.state.names
        stamps: Stamps = {}
        unsure: set[int] = set()
        for workload_id, write in idle.items():
            stamps[workload_id] = (write.before, write.stamp)
            name = names.get(workload_id)
            row = rows.get(name) if name is not None else None
            if row is None or row.id != workload_id:
                unsure.add(workload_id)
                continue
            since = None
            started = row.info.started_at
            if row.state != WorkloadState.PENDING and write.since is not None:
                since = write.since.timestamp()
                if started is None or not started <= since <= now:
                    since = None
            self.state.put(replace(row, info=replace(row.info, idle_since=since)))
        self.state.own_writes(stamps, unsure=unsure, quiet=True)

    # -- 1 sync ----------------------------------------------------------------------------

    def _decide_sync(self, at: datetime, keys: set[WorkloadKey], nodes: set[str]) -> SyncDecision:
        """What the database must learn from the cluster this cycle. The workloads an apply
        handed on is still binding are left to the next cycle's sync: what their pods show
        (members bound, or evicted again by a failed gang's roll-back) is read only once the
        apply's outcome is recorded, so a roll-back is never taken for a lost workload."""
        state = self.state
        # Everything the snapshot reads too: the snapshot's refresh after the sync reads the
        # database again only when the sync wrote what the loop cannot put into its state.
        state.refresh(at)
        decision = SyncDecision(at=at)
        if self.first:  # everything, not only the delta: a dry run or a failure took it
            nodes = nodes | set(self.mirror.nodes) | set(state.nodes)
        # A refresh that read every node (the first) described them for this comparison too.
        inventory, state.node_inventory = state.node_inventory, None
        if nodes:
            known = inventory
            if known is None:
                known = self._known_nodes(None if self.first else nodes)
            decide_nodes(decision, self.mirror, nodes, known, state.flavor_rows)
        if self.first:  # every row (those re-read, ``state.changed``, among them); a holder's
            # key is among the mirror's already
            holders = self.mirror.holders
            keys = keys | set(self.mirror.pods)
            keys |= {key_of(name) for name in state.rows if name not in holders}
            # A new process: a growth recorded before the last one stopped may still wait for
            # its bindings; ``_growing_keys`` keeps the elastic gangs whose added pods wait,
            # live, for a node (else the sync took their placements for lost members).
            rows = state.rows
            self.growing |= {n for n in rows.placed if rows[n].info.min_member is not None}
        else:
            keys = keys | {key_of(name) for name in state.changed}
        keys = keys | self._held_back
        self._held_back = set()
        if self.handed_on is not None:
            in_flight = self.handed_on.work.bind
            self._held_back = {key for key in keys if str(key) in in_flight}
            keys = keys - self._held_back
        growing = self._growing_keys() & keys
        if growing:  # their added pods wait for apply's binding: synced once they are bound
            self._held_back |= growing
            keys = keys - growing
        unknown = [key for key in keys if str(key) not in state.rows]
        namespaces = state.namespaces  # read with the policy tables (their digest)
        self._namespaces = namespaces  # the registered workloads' overlay reads them too
        decide_workloads(
            decision,
            self.mirror,
            state,
            self.memory,
            keys,
            self._ended(unknown),
            namespaces,
            at.timestamp(),
        )
        return decision

    def _possible_growths(self, decided: Plan, now: float) -> Plan:
        """The plan without the growths (``Plan.grow``) apply could not carry out: an elastic
        gang made outside gpupool grows only onto its pods that exist and wait for a node, of
        the pod sets it adds to (gpupool makes the pods of work submitted through it). The
        core counts a gang's pods as its pod sets declare them, which a kubectl gang that lost
        a member still does: growing it again onto a pod that is gone would shrink it at the
        next sync, and grow it again, cycle after cycle. A growth left out leaves its
        capacity free (the grow phase is the cycle's last). Nor is a gang whose last growth
        could not be bound grown again within ``GROW_RETRY_S``."""
        failed = self.grow_failed_until
        for name in [n for n, until in failed.items() if until <= now]:
            del failed[name]
        if not decided.grow:
            return decided
        rows = self.state.rows
        kept: list[Admission] = []
        for growth in decided.grow:
            row = rows.get(growth.workload)
            if row is None or growth.workload in failed:
                continue
            if row.origin != Origin.GPUPOOL:
                key = key_of(growth.workload)
                grouped = self.mirror.grouped(key, now)
                request = grouped if isinstance(grouped, WorkloadRequest) else None
                pods = self._as_bound(self.mirror.pods_of(key))
                waiting = {
                    index: sum(1 for p in members if p.node_name is None and is_live(p))
                    for index, members in pods_by_set(row, pods, request).items()
                }
                wanted = Counter(ref.pod_set for ref in growth.pod_refs)
                if any(waiting.get(index, 0) < count for index, count in wanted.items()):
                    continue
            kept.append(growth)
        if len(kept) == len(decided.grow):
            return decided
        return replace(decided, grow=tuple(kept))

    def _growing_keys(self) -> set[WorkloadKey]:
        """The grown elastic gangs (``growing``) whose added pods wait, live, for apply to bind
        them (a crash between record and apply, a binding handed on): the sync leaves them to
        a later cycle, as it does an apply in flight -- it would take the placements no pod
        holds yet for lost members, and shrink the gang back. So too one submitted through
        gpupool whose added pods gpupool has still to make (their making died with the
        apply; a new process cannot tell them from pods deleted while it was down, and makes
        those again too). Not one a pod of which went from its node without ending, as the
        sync saw it go: a member lost is the sync's to judge (held back, a waiting pod was
        bound onto its placement and the loss recorded nowhere); nor one with no pod waiting
        otherwise (gone)."""
        keys: set[WorkloadKey] = set()
        departures = self.memory.departed
        for name in self.growing:
            row = self.state.rows.get(name)
            if row is None or row.state != WorkloadState.RUNNING:
                continue
            departed = departures.get(name, ())
            if not all(p.finished for p in departed):
                continue
            key = key_of(name)
            pods = self._as_bound(self.mirror.pods_of(key))
            placed = len(row.info.placement)
            if sum(1 for p in pods if p.node_name is not None) >= placed:
                continue
            if any(is_live(p) and p.node_name is None for p in pods):
                keys.add(key)
            elif row.origin == Origin.GPUPOOL:
                # Its pods there, and those that ended (they hold their placements).
                made = sum(
                    1 for p in pods if made_by_gpupool(p) and (is_live(p) or p.node_name)
                ) + sum(1 for p in departed if p.finished)
                if made < placed:
                    keys.add(key)
        return keys

    def _known_nodes(self, names: Iterable[str] | None) -> dict[str, dict[str, object]]:
        """The database's nodes by name, as ``sync.inventory_of`` describes them: those named,
        or (None) every node -- the first sync looks at them all, and a filter by 5,000 names
        took the server longer than the reads themselves."""
        gpus, nodes = Gpu.objects.all(), Node.objects.all()
        if names is not None:
            wanted = name_list(list(names))
            gpus, nodes = gpus.filter(node__name__in=wanted), nodes.filter(name__in=wanted)
        unhealthy: dict[int, int] = {}
        counts: dict[int, int] = {}
        for node_id, count, marked in (
            gpus.values_list("node_id")
            .annotate(
                count=Count("id"),
                marked=Count("id", filter=Q(healthy=False, unhealthy_reason=CLUSTER_UNHEALTHY)),
            )
            .values_list("node_id", "count", "marked")
        ):
            counts[node_id], unhealthy[node_id] = count, marked
        known: dict[str, dict[str, object]] = {}
        layouts: dict[str, dict[str, Any]] = {}  # decoded MIG layouts, by their JSON text
        rows = nodes.values_list(
            "id",
            "name",
            "flavor_id",
            "cpu",
            "memory_gb",
            "nvlink_domain",
            "zone",
            "labels",
            "mig_layout",
            "cluster_exclusion",
            "gone_at",
        )
        for (
            pk,
            name,
            flavor_id,
            cpu,
            memory_gb,
            nvlink_domain,
            zone,
            labels,
            mig_layout,
            exclusion,
            gone_at,
        ) in plain_rows(rows):  # JSON as text on PostgreSQL: a node's own dicts either way
            known[name] = {
                "flavor_id": flavor_id,
                "gpus": counts.get(pk, 0),
                "unhealthy_in_cluster": unhealthy.get(pk, 0),
                "cpu": cpu,
                "memory_gb": memory_gb,
                "nvlink_domain": nvlink_domain,
                "zone": zone,
                "labels": dict(json_of(labels) or {}),
                "mig_layout": own_layout(layouts, mig_layout),
                "exclusion": exclusion,
                "gone": gone_at is not None,
            }
        return known

    def _ended(self, keys: list[WorkloadKey]) -> dict[WorkloadKey, Known]:
        """Workloads the database knows that are not live any more (so their pods are not
        registered again)."""
        if not keys:
            return {}
        found: dict[WorkloadKey, Known] = {}
        wanted = set(keys)
        rows = Workload.objects.filter(
            namespace__in={k.namespace for k in keys}, name__in={k.name for k in keys}
        ).values_list("id", "namespace", "name", "state", "eviction_reason")
        for pk, namespace, name, state, reason in rows:
            key = WorkloadKey(namespace, name)
            if key in wanted:
                found[key] = Known(pk, state, reason)
        return found

    def _overlay_registered(self, decision: SyncDecision, at: datetime) -> None:
        """What the cluster adds to the workloads the sync just registered (their allowed
        nodes, missing pods), so they are planned in this cycle already: decided by the sync
        (``sync._unknown``) on the nodes the state held then, and again here on the nodes
        the refresh read when the sync wrote nodes too."""
        if not (decision.nodes or decision.gone):
            return
        keys = {r.key for r in decision.registrations if str(r.key) in self.state.rows}
        if keys:
            scratch = SyncDecision(at=at)
            decide_workloads(
                scratch,
                self.mirror,
                self.state,
                self.memory,
                keys,
                {},
                self._namespaces,
                at.timestamp(),
            )
            # Pods the nodes just written show no node could hold (``sync._refused``: a
            # first sync judges them only once the nodes are rows) are told so now.
            if scratch.events:
                self._emit_sync_events(scratch)

    def _put_steps(self, decision: SyncDecision, stamps: Stamps) -> bool:
        """The pod-driven transitions just written, into the state (so the snapshot's read
        need not read them back): starts and requeues; the rest is read again. They are held
        quiet (``own_writes(..., seen=True)``): the sync wrote them from what the cluster
        says, so the next cycle's sync and apply need not look at them again (400-750 rows a
        steady cycle at B1's size) unless their pods change; this cycle's apply looks at them
        (``outstanding``: a requeued workload's pods are made again). Whether every row
        written was put (then the snapshot need not read the database again)."""
        steps: dict[int, list[tuple[str, datetime]]] = {}
        names: dict[int, str] = {}
        for step in decision.steps:
            steps.setdefault(step.workload_id, []).append((step.to_state, step.at))
            names[step.workload_id] = step.name
        unsure = set(decision.checkpoints) | set(decision.pod_sets)
        for workload_id, taken in steps.items():
            row = self.state.rows.get(names[workload_id])
            after = None if row is None or row.id != workload_id else stepped(row, taken)
            if after is None:
                unsure.add(workload_id)
            elif workload_id not in unsure:
                self.state.put(after)
        self.outstanding.update(names.values())
        self.state.own_writes(stamps, unsure=unsure, quiet=True, seen=True)
        return not unsure and all(pk in self.state.held for pk in stamps)

    def _policy_rows(self) -> RegistrationPolicy:
        """The rows registrations are checked against: read once after each read of the
        policy tables (on PostgreSQL, when their fingerprint changes; elsewhere every cycle)."""
        if self.state.registration_policy is None:
            self.state.registration_policy = RegistrationPolicy.read()
        return self.state.registration_policy

    def _put_registered(self, registered: list[Registered]) -> None:
        """The workloads the sync just registered, into the state as ``read_workloads``
        would read them back (``LoopState.put_registered``): the snapshot's refresh need not
        read them (their pod sets, placements and rows: four queries and a row each)."""
        if not registered:
            return
        flavors = self.state.flavor_rows
        rows: list[tuple[WorkloadRow, datetime | None]] = []
        for made in registered:
            registration = made.registration
            name = str(registration.key)
            info = WorkloadInfo(
                name=name,
                queue=registration.queue,
                priority_class=made.priority_class,
                pod_sets=tuple(shape_info(shape, flavors) for shape in registration.pod_sets),
                submitted_at=registration.submitted_at.timestamp(),
                state="pending",
                min_member=registration.min_member,
                topology=core_topology(registration.topology),
                protected_runtime_s=float(made.protected_runtime_s),
                expected_runtime_s=None
                if registration.expected_runtime_s is None
                else float(registration.expected_runtime_s),
            )
            row = WorkloadRow(
                made.workload_id,
                info,
                made.pod_set_ids,
                state=WorkloadState.PENDING,
                origin=registration.origin,
            )
            rows.append((row, made.stamp))
        self.state.put_registered(rows)

    def _emit_sync_events(self, decision: SyncDecision) -> None:
        """The sync's Events, sent together (``record_events``)."""
        self.backend.record_events(
            [
                EventRequest(
                    pod, event.reason, event.message, "Warning" if event.warning else "Normal"
                )
                for event in decision.events
                for pod in event.pods
            ]
        )
        for release in decision.release:  # a gang's members left: no half-gangs
            self.backend.delete_pods(release.pods, release.reason)

    # -- 2 snapshot ------------------------------------------------------------------------

    def _drop_ended_overlays(self) -> None:
        for ended in self.state.ended:
            self.refusals_told.pop(ended.name, None)
            self.memory.overlays.pop(ended.name, None)
            self._medians.pop(ended.name, None)
            self.facts_cache.pop(ended.id, None)
            self.outstanding.add(ended.name)

    def _overlay(self, now: float) -> dict[str, WorkloadInfo]:
        """The workloads the cluster changes in the snapshot (left out: excluded ones)."""
        rows = self.state.rows
        overlaid: dict[str, WorkloadInfo] = {}
        names = self.state.names
        for name, overlay in self.memory.overlays.items():
            row = rows.get(name)
            if row is None or row.state != WorkloadState.PENDING:
                continue
            overlaid[name] = overlay.apply(row.resolve(names, now))
        for name, until in list(self.refused_until.items()):
            row = rows.get(name)
            if until <= now or row is None or row.info.started_at is None:
                self.refused_until.pop(name, None)
                continue
            info = overlaid.get(name) or row.resolve(names, now)
            overlaid[name] = replace(info, eviction_refused_until=until)
        # Running work at a class that costs budget, inside the window it declares: whether
        # its admission reserved that window (the ledger's word, ``BudgetBook``; the pages'
        # snapshot reads it so, ``budgets.reserved_windows``) -- a window beyond its queue's
        # cap is protection only if it was paid for (``window_at_stake``: work its queue's
        # cap does not cut is left as it is, the flag could not change its window).
        caps = {q.name: q.max_protected_runtime_s for q in self.state.queues}
        # (no queue caps a window, as in B1's pool: nothing to tell of its ~3,000 charges)
        capped = any(cap is not None for cap in caps.values())
        for charge in self.budgets.charges.values() if capped else ():
            charged = names.get(charge.workload_id)
            row = rows.get(charged) if charged is not None else None
            if (
                charged is None
                or row is None
                or not window_at_stake(row.info, caps.get(row.info.queue, 0.0), now)
            ):
                continue
            info = overlaid.get(charged) or row.resolve(names, now)
            overlaid[charged] = replace(info, window_reserved=charge.window_end > charge.start)
        excluded = {n: o for n, o in self.memory.overlays.items() if o.excluded}
        self.state.excluded = set(excluded)
        self.too_large = {
            rows[name].id: o.why for name, o in excluded.items() if o.why and name in rows
        }
        self.malformed = {
            rows[name].id: o.malformed
            for name, o in excluded.items()
            if o.malformed and name in rows
        }
        # Expected runtimes by ``RuntimeHistory.expected_runtime`` (learning.py): learned for
        # work that declares none; for running work past its end, the median of similar runs
        # that lasted longer, else unknown -- not "ends now" at every cycle. Each answer is
        # kept while it holds (``Expected.until``), for the same row and history (``_medians``).
        self.learned = set()
        medians, version = self._medians, self.runtimes.version
        for name in chain(rows.unestimated, self._declared_passed(now)):
            row = rows[name]
            known = medians.get(name)
            if known is None or known[0] is not row.info:
                expected, kept = self.runtimes.expected_runtime(row.info, now), None
            elif known[3] == version and now < known[1].until:
                expected, kept = known[1], known[2]
            else:
                # Asked again (the history moved, or the answer's time ran out: most cycles,
                # for most of them); the same runtime: the info made for it still serves.
                expected = self.runtimes.expected_runtime(row.info, now)
                kept = known[2] if known[1].runtime_s == expected.runtime_s else None
            if expected.runtime_s != row.info.expected_runtime_s:
                info = overlaid.get(name) or row.resolve(names, now)
                if info is not row.info:  # overlaid already, or resolved anew: this cycle's
                    overlaid[name] = replace(info, expected_runtime_s=expected.runtime_s)
                else:
                    if kept is None:
                        kept = replace(info, expected_runtime_s=expected.runtime_s)
                    overlaid[name] = kept
            medians[name] = (row.info, expected, kept, version)
            if expected.learned:
                self.learned.add(name)
        return overlaid

    def _declared_passed(self, now: float) -> set[str]:
        """Running work whose declared end (``started_at + expected_runtime_s``) has come, for
        ``_overlay``. Kept up to date from what changed, not a scan of the 20,000 running at
        B1's size each cycle: the names placed since the last cycle are looked at once, their
        declared ends wait in a heap (one entry a name: ``_declared_due``), and only the ends
        that came are looked at again. A name stays past while it stays placed: ``_overlay``'s
        rule reads its row again whenever that changes (a runtime declared anew, a restart)."""
        rows = self.state.rows
        placed = rows.placed
        watched, ends, due = self._declared_watched, self._declared_ends, self._declared_due
        past = self._declared_past
        for name in watched - placed:
            watched.discard(name)
            past.discard(name)
            due.pop(name, None)
        came = placed - watched
        watched |= came
        while came or (ends and ends[0][0] <= now):
            if came:  # placed since the last cycle
                name = came.pop()
            else:
                at, name = heapq.heappop(ends)
                if due.get(name) != at:
                    continue  # left the placed work, or looked at again since
                del due[name]
            info = rows[name].info
            if info.expected_runtime_s is None:
                continue  # declares nothing: learned (``unestimated``)
            # admitted, not started yet: looked at again next cycle
            end = (
                now + 1.0 if info.started_at is None else info.started_at + info.expected_runtime_s
            )
            if end <= now:
                past.add(name)
            else:
                due[name] = end
                heapq.heappush(ends, (end, name))
        return past

    def _notify(self, decision: SyncDecision) -> None:
        """Tell submitters that their workload started, was preempted or failed (their mail
        preferences decide; ``notifications.notify_workload_event`` never fails a cycle)."""
        events: dict[str, str] = {
            WorkloadState.RUNNING: WorkloadEvent.STARTED,
            WorkloadState.PREEMPTED: WorkloadEvent.PREEMPTED,
            WorkloadState.FAILED: WorkloadEvent.FAILED,
        }
        rows = self.state.rows
        told = [
            s
            for s in decision.steps
            if s.to_state in events
            # Only work submitted through gpupool has a submitter (not the cluster's own).
            and getattr(rows.get(s.name), "origin", Origin.GPUPOOL) == Origin.GPUPOOL
        ]
        if not told:
            return
        people = Workload.objects.filter(
            pk__in=id_list({s.workload_id for s in told}), submitter__isnull=False
        ).in_bulk()
        for step in told:
            workload = people.get(step.workload_id)
            if workload is not None:
                notify_workload_event(
                    workload, events[step.to_state], at=step.at, details={"reason": step.reason}
                )

    def _learn(self, decision: SyncDecision, now: float) -> None:
        """Runtimes of the work that just succeeded, for the work like it that follows."""
        finished = []
        for step in decision.steps:
            row = self.state.rows.get(step.name)
            if step.to_state == WorkloadState.SUCCEEDED and row is not None:
                started = row.info.started_at or now
                finished.append((row.info, step.at.timestamp() - started))
        self.runtimes.add(finished)

    def _record_foreign_usage(self, changed: Iterable[str]) -> None:
        """What other schedulers' pods hold, onto the rows of the nodes where it changed
        (``changed``: the sync's delta; every node the first time, from the rows), for the
        pages' view of the pool (``control.queries``); the loop's own applies the mirror's."""
        usage = self.mirror.foreign_usage
        recorded = self.foreign_recorded
        if recorded is None:
            recorded = self.foreign_recorded = dict(
                Node.objects.exclude(foreign_usage={}).values_list("name", "foreign_usage")
            )
            names: Iterable[str] = recorded.keys() | usage.keys()
        else:
            names = changed
        writes: dict[str, dict[str, object]] = {}
        for name in names:
            amounts = usage.get(name)
            now = amounts.as_json() if amounts is not None else {}
            if recorded.get(name, {}) != now:
                writes[name] = now
        if writes:
            do_record_foreign_usage(writes)
            for name, now in writes.items():
                if now:
                    recorded[name] = now
                else:
                    recorded.pop(name, None)

    def _with_cluster_usage(self, snapshot: Snapshot) -> Snapshot:
        """Nodes less what other schedulers' pods, and ours the database does not place, hold
        (the workloads with a pod on a node, ``ClusterMirror.holders``, less those placed)."""
        usage = dict(self.mirror.foreign_usage)
        holders = self.mirror.holders
        for name in sorted(holders.keys() - self.state.rows.placed):
            pods = self.mirror.pods.get(holders[name], {})
            for held_on, held in self.mirror.held_usage(pods).items():
                usage[held_on] = usage[held_on].plus(held) if held_on in usage else held
        labels = {
            name: facts.labels
            for name in usage
            if (facts := self.mirror.nodes.get(name)) is not None
        }
        return with_foreign_usage(snapshot, usage, labels)

    # -- 4 record --------------------------------------------------------------------------

    def _draining(self) -> set[str]:
        """The nodes being drained: asked to drain and still cordoned (uncordoning a node ends
        its drain: ``inventory.actions.do_end_drain``). Not asked when the state, refreshed
        this cycle, has no cordoned node (a query a cycle)."""
        if not any(node.cordoned for node in self.state.nodes.values()):
            return set()
        return set(
            Node.objects.filter(
                drain_requested_at__isnull=False, cordoned=True, gone_at=None
            ).values_list("name", flat=True)
        )

    def _emptied(self, draining: Collection[str]) -> set[str]:
        """The draining nodes nothing of gpupool's is left on: no pod of gpupool's holds them
        and the database places no workload there. Other schedulers' pods do not keep a node
        draining: gpupool never evicts them, so the drain has done all it will (the node's
        ``foreign_usage`` says what they still hold, and the pages say so); the cluster's
        cordon (``_push_cordons``) keeps new ones away."""
        held = {
            pod.node_name
            for pods in self.mirror.pods.values()
            for pod in pods.values()
            if holds_node(pod)
        }
        rows = self.state.rows
        held.update(pod.node for name in rows.placed for pod in rows[name].info.placement)
        return {name for name in draining if name not in held}

    def _push_cordons(self) -> None:
        """The cluster's cordons follow gpupool's (DESIGN section 4): a node an admin cordoned
        or drains is cordoned in the cluster too (``set_node_unschedulable``: other
        schedulers place nothing there either), and gpupool's own cordon is lifted once the
        admin uncordons it. Asked only where the cluster differs (a query a cycle only while
        some node is cordoned), at most every ``CORDON_RESEND_S`` per node; a node someone
        else cordoned is asked about once (the backend leaves that cordon: ``kept``). A
        backend that cannot cordon nodes (a test double) is left alone."""
        push = getattr(self.backend, "set_node_unschedulable", None)
        nodes = self.mirror.nodes
        if push is None or not nodes:
            return
        wanted: set[str] = set()
        if any(node.cordoned for node in self.state.nodes.values()):
            wanted = set(
                Node.objects.filter(cordoned=True, gone_at=None).values_list("name", flat=True)
            )
        sent = self.cordons_sent
        for name in [name for name in sent if name not in nodes]:
            del sent[name]
        clock = time.monotonic()
        for name, facts in nodes.items():
            want = name in wanted
            if want == facts.unschedulable:
                sent.pop(name, None)
                continue
            last = sent.get(name)
            if last is not None and last[0] == want and clock - last[1] < CORDON_RESEND_S:
                continue  # asked moments ago (the watch has not shown it yet), or settled
            result = push(name, want)
            settled = result.status in ("kept", "gone")
            sent[name] = (want, math.inf if settled else clock)
            if result.status == "failed":
                logger.warning("cordon of node %s in the cluster failed: %s", name, result.message)
            elif result.status != "unchanged":
                logger.info("node %s %s in the cluster %s", name, result.status, result.message)

    def _known_ranks(self) -> dict[int, float] | None:
        """The queue ranks this loop wrote, unless another process recorded a cycle since
        (Celery workers each keep a loop): then unknown, and the record writes them all."""
        if (self.ranks is not None or self.totals is not None) and (
            SchedulingCycle.objects.filter(pk__gt=self.ranked_in)
            .exclude(status=CycleStatus.SKIPPED)
            .exists()
        ):
            self.ranks = self.totals = None  # the counters too: the other's row carries them
        return self.ranks

    def _remember_decided(
        self, moved: Snapshot, decided: Plan, record: CycleRecord
    ) -> dict[str, WorkloadRow]:
        """The rows the record writes, as the state is to hold them (name -> row), so that
        apply acts on what was just decided (``moved``: the snapshot after the plan,
        ``lifecycle.apply_plan``): each row as ``read_workloads`` gives it back, not as the
        snapshot's overlays showed it. Taken by the state after the commit only
        (``_remember_written``)."""
        placed = {admission.workload for admission in decided.admit}
        after = {w.name: w for w in moved.workloads if w.name in placed}
        rows = self.state.rows
        written: dict[str, WorkloadRow] = {}
        started = record.at.timestamp()
        for admission in decided.admit:
            row = rows[admission.workload]
            info = info_with(
                row.info,
                state="running",
                placement=after[admission.workload].placement,
                started_at=started,
                last_checkpoint_at=None,
                nominated=False,
            )
            written[admission.workload] = WorkloadRow(  # by position, as ``info_with``
                row.id,
                info,
                row.pod_set_ids,
                row.evicting_for_id,
                WorkloadState.ADMITTED,
                row.origin,
                row.eviction_reason,
                row.idle_alerted_since,
            )
        grown = {growth.workload for growth in decided.grow}
        for w in named(moved.workloads, grown):  # running still, with the pods it added
            row = rows[w.name]
            written[w.name] = replace(row, info=info_with(row.info, placement=w.placement))
        for eviction in record.evictions:
            name = eviction.name
            row = written[name] if name in written else rows[name]
            written[name] = replace(
                row,
                info=info_with(row.info, leaving=eviction.preemptor_id is None),
                eviction_reason=eviction.reason,
                evicting_for_id=eviction.preemptor_id,
            )
        for alert in record.idle_alerts:  # written unstamped: read again at the next refresh
            row = written[alert.name] if alert.name in written else rows[alert.name]
            written[alert.name] = replace(row, idle_alerted_since=alert.idle_since.timestamp())
        return written

    def _remember_written(
        self,
        prepared: PreparedApply,
        record: CycleRecord,
        stamps: Stamps,
        nominations: Stamps,
    ) -> None:
        """After the record's commit: the state takes the rows as written
        (``_remember_decided``), and the next refresh need not read them back
        (``LoopState.own_writes``); the loop takes what preparing the apply looked at
        (``_work``). The nominations (``nominations``: their rows' stamps) are held quiet:
        neither the sync nor apply has anything to do for a pending workload's nomination, so
        the next cycle does not look at those rows again (about a hundred a cycle at B1's
        size)."""
        for row in prepared.rows.values():
            self.state.put(row)
        for admission in record.admissions:
            self.written.pop(admission.workload_id, None)
            self.written_at.pop(admission.workload_id, None)
            self.facts_cache.pop(admission.workload_id, None)
        for eviction in record.evictions:
            self.evictions_sent.pop(eviction.name, None)
        self.evictions_sent.update(prepared.sent)
        self.outstanding = prepared.outstanding
        self.growing = prepared.growing
        rows = self.state.rows
        names = self.state.names
        for workload_id, nominated in record.nominated.items():
            name = names.get(workload_id)
            pending = rows.get(name) if name is not None else None
            if (
                workload_id in nominations
                and pending is not None
                and pending.state == WorkloadState.PENDING
            ):
                self.state.put(replace(pending, info=info_with(pending.info, nominated=nominated)))
        self.state.own_writes(stamps)
        self.state.own_writes(nominations, quiet=True)
        self.written.update(record.explanations)
        self.written_at.update(dict.fromkeys(record.explanations, time.monotonic()))
        for name, detail in prepared.fresh.items():  # an Event only when the reason is new
            self.explain_queue.pop(name, None)
            self.explain_queue[name] = detail
        told_at = time.monotonic()
        for name in prepared.explained:  # their Events are this cycle's
            told = self.explain_queue.pop(name, None)
            if told is not None:
                self.evented[name] = (told, told_at)
        ranks = {} if self.ranks is None else self.ranks
        for admitted in record.admissions:
            ranks.pop(admitted.workload_id, None)
        for workload_id, rank in record.ranks.items():
            if rank is None:
                ranks.pop(workload_id, None)
            else:
                ranks[workload_id] = rank
        self.ranks = ranks
        # The evictions' preemption events are read back from the database at the next
        # refresh (``_read_history``: by id, cheap).

    # -- 5 apply ---------------------------------------------------------------------------

    def _prepare_apply(
        self,
        moved: Snapshot,
        decided: Plan,
        record: CycleRecord,
        now: float,
        keys: set[WorkloadKey],
    ) -> PreparedApply:
        """The apply of what the record decides, prepared while the server writes it
        (``do_record_cycle``'s ``meanwhile``): no database, and nothing of the loop changed
        (``PreparedApply``). The workloads looked at: those whose apply is not confirmed yet,
        those decided now, every one at a first cycle, those whose pods or rows changed."""
        rows = self._remember_decided(moved, decided, record)
        evicted = {eviction.name for eviction in record.evictions}
        examine = set(self.outstanding)
        examine.update(admission.workload for admission in decided.admit)
        examine.update(growth.workload for growth in decided.grow)
        examine |= self.growing
        examine |= evicted
        if self.first:
            examine.update(self.state.rows)
        examine.update(map(str, keys))
        examine |= self.state.changed
        names = self.state.names
        fresh = {  # explanations whose reason is new: queued last (``_remember_written``),
            # oldest first (by id: a set of ids iterates by their hashes, which wrap around
            # the table's size, so the "newest" half of the Events went to arbitrary ones)
            name: record.explanations[workload_id].detail
            for workload_id in sorted(record.new_reasons)
            if (name := names.get(workload_id)) is not None
        }
        fresh.update(self._stale_events(fresh))
        # Work the core set aside as never fitting gets no pods made (``cycle.enqueue``).
        never = {p.workload for p in decided.pending if never_fits(p.facts)}
        grown = {growth.workload for growth in decided.grow}
        return self._work(
            examine,
            now,
            rows=rows,
            evicted=evicted,
            fresh=fresh,
            never=never,
            grown=grown,
            told=self._told(record, flavor_units(moved.flavors)),
        )

    def _told(
        self, record: CycleRecord, units: Mapping[str, str]
    ) -> Callable[[WorkloadRow, str], str]:
        """What a waiting workload's pods are told for its queued sentence: a sentence that
        says the position, with the position the API says once ``record`` is committed
        (counted as ``Workload.queue_position`` counts it: its queue's ranks up to its own,
        ``CycleRecord.ranked``), rendered as the readers render it
        (``workloads.queries.sentence``) from its explanation as now written. The core's own
        sentence counts the work ahead that has no rank (a gang waiting for its pods, work
        that never fits): ``kubectl describe pod`` said 3rd where the API said 2nd. Only the
        words change: what was told, for ``_stale_events``, is the queued sentence, so a
        position that moved alone sends no Event, as before."""
        written, explanations, ranked = self.written, record.explanations, record.ranked
        by_queue = record.ranks_by_queue  # queue -> its ranks, ascending

        namespaces = self._namespaces

        def told(row: WorkloadRow, detail: str) -> str:
            explanation = explanations.get(row.id)
            if explanation is None:
                explanation = written.get(row.id)
            if explanation is None:
                return detail
            # Read by the workload's own team (``kubectl describe pod``): another team's
            # workload the sentence names is not named (``TeamSees``, the API's rule).
            team = TeamSees(namespaces.get(row.info.name.partition("/")[0]), namespaces)
            rank = ranked.get(row.id)
            if rank is None or not says_position(explanation.reason, explanation.facts):
                # no position: the API says the sentence as written
                return sentence_seen_by(detail, explanation.facts, team)
            position = bisect_right(by_queue.get(row.info.queue, []), rank)
            return sentence(
                explanation.reason, explanation.facts, position, detail, team, units=units, zone=UTC
            )

        return told

    def _stale_events(self, fresh: Mapping[str, str]) -> dict[str, str]:
        """Waiting workloads whose pods were told a sentence EVENT_REFRESH_S ago or more that
        the explanation written since no longer reads (the same reason, its numbers moved:
        "124 GPUs of quota available" when 103 are): told again, after the new reasons
        (``fresh``). Looked at every EVENT_RECHECK_S; workloads no longer waiting are
        forgotten."""
        now = time.monotonic()
        if now - self.events_checked_at < EVENT_RECHECK_S:
            return {}
        self.events_checked_at = now
        rows, written = self.state.rows, self.written
        stale: dict[str, str] = {}
        gone: list[str] = []
        for name, (told, told_at) in self.evented.items():
            row = rows.get(name)
            if row is None or row.state != WorkloadState.PENDING:
                gone.append(name)
                continue
            explanation = written.get(row.id)
            if (
                explanation is not None
                and told_at <= now - EVENT_REFRESH_S
                and explanation.detail != told
                and name not in fresh
            ):
                stale[name] = explanation.detail
        for name in gone:
            del self.evented[name]
        return stale

    def _apply(self, prepared: PreparedApply, now: float, *, hand_on: bool) -> ApplyOutcome | None:
        """Make the cluster match the database (after the record's commit, ``prepared``
        while it was written); record what it taught. With ``hand_on`` (the pipeline) and
        bindings to make, on a backend that allows it, the work goes to the applier's thread
        instead (``handed_on``) and None comes back: the next cycle records its outcome
        (``_join_apply``)."""
        work = prepared.work
        for name, pods in prepared.unknown.items():
            self._delete_if_cancelled(name, pods, work)
        if prepared.runs_wanted:
            work.create = self._new_pods(prepared.runs_wanted)
        work.drained = drain_words(work)  # in this thread: the applier's reads no database
        if hand_on and work.bind and self.backend.concurrent_apply:
            if self._applier is None:
                self._applier = ThreadPoolExecutor(1, thread_name_prefix="gpupool-apply")
            future = self._applier.submit(run_apply, self.backend, work)
            self.handed_on = HandedOn(future, now, work)
            return None
        outcome = run_apply(self.backend, work)
        self._settle(outcome, work, now)
        return outcome

    def _join_apply(self) -> tuple[ApplyOutcome, bool]:
        """Wait for the apply the last cycle handed on and record its outcome; whether that
        wrote anything (then what this cycle planned is out of date). An apply that raised
        raises here: the cycle fails and the next one starts over, as after a crash between
        record and apply."""
        handed, self.handed_on = self.handed_on, None
        assert handed is not None
        outcome = handed.outcome.result()
        return outcome, self._settle(outcome, handed.work, handed.now)

    def _settle(self, outcome: ApplyOutcome, work: ApplyWork, now: float) -> bool:
        """Record what an apply of ``work`` taught (decided at cluster time ``now``); whether
        it wrote. The gangs it bound are remembered until the mirror shows them."""
        for name, gang in work.bind.items():
            if name not in outcome.bind_failed:
                for binding in gang:
                    self.bound[binding.pod.key] = (binding.pod.uid, binding.node)
        at = moment(now)
        rows = self.state.rows  # (the names apply failed for only: not a map of every row)
        shrinks = self._growths_failed(outcome, work, now, at)
        bind_failed = {
            row.id: why
            for n, why in outcome.bind_failed.items()
            if (row := rows.get(n)) is not None and row.state != WorkloadState.RUNNING
        }
        refused = {
            row.id: why for n, why in outcome.refused.items() if (row := rows.get(n)) is not None
        }
        for name in outcome.refused:
            self.refused_until[name] = now + REFUSAL_BACKOFF_S
            self.evictions_sent.pop(name, None)
        self._tell_refusals(outcome, work)
        over = self._refusals_over(outcome, work)
        if bind_failed or refused or shrinks:
            moves = self.budgets.leave(list(bind_failed), now)
            moves += self.budgets.shrink(shrinks, rows, now)
            do_record_apply_outcome(
                at=at,
                bind_failed=bind_failed,
                refused=refused,
                budget_moves=moves,
                refusals=self._refusals(outcome, work, at),
                refusals_over=over,
                shrinks=shrinks,
            )
            self.state.forget_events(outcome.refused)
            return True
        if over:  # nothing the loop plans on changed: no need to plan again
            do_record_apply_outcome(at=at, bind_failed={}, refused={}, refusals_over=over)
        return False

    def _growths_failed(
        self, outcome: ApplyOutcome, work: ApplyWork, now: float, at: datetime
    ) -> list[Shrink]:
        """Running elastic gangs whose added pods could not be bound (``added_bindings``: only
        they were in the gang, so the pods the workload ran still run): each goes on with the
        pods it ran, as a gang that lost members does (``sync.Shrink``: the added pods'
        placements removed -- the last ones, in pod-set order -- its usage opened again for
        the GPUs it still holds, its budget charged for those), and never leaves; the pods
        not bound are told why, as waiting pods are, with an Event. It is not grown again
        within ``GROW_RETRY_S``."""
        shrinks: list[Shrink] = []
        events: list[EventRequest] = []
        for name, why in sorted(outcome.bind_failed.items()):
            row = self.state.rows.get(name)
            if row is None or row.state != WorkloadState.RUNNING:
                continue
            gang = work.bind.get(name, [])
            ran = len(row.info.placement) - len(gang)
            keep: list[tuple[int, int, int]] = []
            for pod_set_id, pod_set in zip(row.pod_set_ids, row.info.pod_sets, strict=False):
                taken = min(pod_set.count, ran - len(keep))
                keep.extend((pod_set_id, index, index) for index in range(taken))
            shrinks.append(Shrink(row.id, name, tuple(keep), at))
            self.growing.discard(name)
            self.grow_failed_until[name] = now + GROW_RETRY_S
            said = (
                f"gpupool could not bind it to grow {name} ({why}); {name} goes on with the "
                f"{counted(ran, 'pod')} it ran; gpupool tries to grow it again after "
                f"{GROW_RETRY_S:.0f} s"
            )
            events.extend(EventRequest(b.pod, "Waiting", said) for b in gang)
        if events:
            try:
                self.backend.record_events(events)
            except Exception:  # an Event is no part of the record
                logger.exception("could not tell the pods of a failed growth")
        return shrinks

    def _refusals(
        self, outcome: ApplyOutcome, work: ApplyWork, at: datetime
    ) -> dict[int, dict[str, Any]]:
        """What each refused victim's row keeps of the refusal (``Workload.eviction_refusal``;
        the record adds for whom): when, the budget and what it needs, why it was evicted
        (``admin``: a drain), the nodes it holds, and the sentence its pods were told."""
        refusals: dict[int, dict[str, Any]] = {}
        rows = self.state.rows
        for name, why in outcome.refused.items():
            row = rows.get(name)
            if row is None:
                continue
            namespace = key_of(name).namespace
            group = work.evict.get(outcome.refused_for.get(name, ""))
            reason = group[2] if group else row.eviction_reason
            budget, needs = refused_budget(why, namespace)
            refusals[row.id] = {
                "at": at.isoformat(),
                "budget": budget,
                "needs": needs,
                "reason": reason,
                "nodes": sorted({pod.node for pod in row.info.placement}),
                "detail": refusal_words(why, namespace, reason),
            }
        return refusals

    def _refusals_over(self, outcome: ApplyOutcome, work: ApplyWork) -> list[int]:
        """The rows whose recorded refusal is over (ids): an eviction of theirs was accepted
        since, or none is wanted any more -- not running, or past the refusal's back-off
        (``refused_until``) with no eviction decided. Remembers the victims refused now. The
        rows that hold one are read once (at the first apply settled); after that nothing is
        read, and nothing looked at while no refusal is recorded."""
        recorded = self.refusals_recorded
        if recorded is None:
            recorded = self.refusals_recorded = {
                f"{namespace}/{name}"
                for namespace, name in Workload.objects.filter(
                    eviction_refusal__isnull=False
                ).values_list("namespace", "name")
            }
        if not recorded and not outcome.refused:
            return []
        sent = {name for victims, _, _ in work.evict.values() for name in victims}
        rows = self.state.rows
        over: list[int] = []
        for name in sorted(recorded):
            if name in outcome.refused:
                continue
            row = rows.get(name)
            if (
                row is None
                or name in sent  # accepted (not refused)
                or row.state != WorkloadState.RUNNING
                or (name not in self.refused_until and not row.eviction_reason)
            ):
                recorded.discard(name)
                if row is not None:
                    over.append(row.id)
        recorded.update(name for name in outcome.refused if name in rows)
        return over

    def _tell_refusals(self, outcome: ApplyOutcome, work: ApplyWork) -> None:
        """A Warning Event on the pods of each victim whose eviction a disruption budget
        refused, naming the budget (``refusal_words``): once per change of what it says, not
        at each retry (a drain retries once the refusal's back-off has passed). A victim
        evicted at last is forgotten."""
        told = self.refusals_told
        for victims, _, _ in work.evict.values():
            for name in victims:
                if name not in outcome.refused:
                    told.pop(name, None)
        events: list[EventRequest] = []
        for name, why in sorted(outcome.refused.items()):
            group = work.evict.get(outcome.refused_for.get(name, ""))
            pods = [pod for pod in self.mirror.pods_of(key_of(name)) if is_live(pod)]
            if not pods:
                continue
            message = refusal_words(why, pods[0].namespace, group[2] if group else "")
            if told.get(name) == message:
                continue
            told[name] = message
            events += [EventRequest(pod.ref, "EvictionRefused", message, "Warning") for pod in pods]
        if events:
            self.backend.record_events(events)

    def _forget_seen_bindings(self, pods: Mapping[PodKey, Any]) -> None:
        """Bindings made that the mirror now shows (or whose pods are gone): not kept."""
        if self.bound:
            for key, change in pods.items():
                if change.after is None or change.after.node_name is not None:
                    self.bound.pop(key, None)

    def _as_bound(self, pods: list[PodFacts]) -> list[PodFacts]:
        """The pods, with the bindings an apply made that the mirror does not show yet."""
        if not self.bound:
            return pods
        shown: list[PodFacts] = []
        for pod in pods:
            made = self.bound.get(pod.key)
            if made is not None and pod.node_name is None and made[0] == pod.uid:
                pod = replace(pod, node_name=made[1])
            shown.append(pod)
        return shown

    def _alert_idle(self, record: CycleRecord) -> None:
        """Tell the owners and team leads of the workloads idle past their alert timeout
        (mail, their preferences decide) and put a Warning Event on their pods: once per idle
        spell (the record remembered it). A failure is logged and never fails the cycle."""
        if not record.idle_alerts:
            return
        try:
            workloads = Workload.objects.select_related("queue").in_bulk(
                [alert.workload_id for alert in record.idle_alerts]
            )
            for alert in record.idle_alerts:
                message = idle_message(alert.idle_since, alert.reclaim_at)
                for pod in self.mirror.pods_of(key_of(alert.name)):
                    if holds_node(pod):
                        self.backend.record_event(pod.ref, "Idle", message, "Warning")
                workload = workloads.get(alert.workload_id)
                if workload is not None:
                    notify_idle_workload(
                        workload, idle_since=alert.idle_since, reclaim_at=alert.reclaim_at
                    )
        except Exception:
            logger.exception("idle alerts failed")

    def _work(
        self,
        names: Iterable[str],
        now: float,
        *,
        rows: dict[str, WorkloadRow],
        evicted: Collection[str],
        fresh: dict[str, str],
        never: Collection[str] = (),
        grown: Collection[str] = (),
        told: Callable[[WorkloadRow, str], str] | None = None,
    ) -> PreparedApply:
        """What apply is to do for these workloads (those that need nothing drop out), as the
        state will be once the record is committed: ``rows`` (name -> row) as it writes them,
        ``evicted`` the victims it chooses (none of their evictions sent yet), ``fresh`` the
        explanations whose reason is new (workload -> sentence, queued after the others),
        ``grown`` the running elastic gangs the record grows (``Plan.grow``), ``told`` what
        a queued sentence becomes on the pods (``_told``; as queued when None).
        Pure: no database, nothing of the loop changed (``PreparedApply``)."""
        held_rows = self.state.rows
        work = ApplyWork()
        outstanding: set[str] = set()
        sent: dict[str, float] = {}
        runs_wanted: list[WorkloadRow] = []
        unknown: dict[str, list[Any]] = {}
        victims: dict[str, tuple[list[str], list[PodRef], str]] = {}
        running = WorkloadState.RUNNING
        growing: set[str] = set()
        grows = set(grown) | self.growing
        # Running where it was placed: nothing to do (left out before the sort: most rows of
        # a first cycle, 20,000 of 30,000 at B1-loop's size).
        for name in sorted(
            name
            for name in names
            if (row := held_rows.get(name)) is None
            or row.state != running
            or row.eviction_reason
            or name in rows
            or name in grows
        ):
            row = rows[name] if name in rows else held_rows.get(name)
            key = key_of(name)
            pods = self._as_bound(self.mirror.pods_of(key))
            if row is None:
                unknown[name] = pods
                continue
            if row.state == WorkloadState.PENDING:
                if row.origin == Origin.GPUPOOL and name not in never:
                    live = [p for p in pods if is_live(p) and made_by_gpupool(p)]
                    if len(live) < row.info.pod_count:
                        runs_wanted.append(row)
                        outstanding.add(name)
                        # An earlier run's pods that ended keep their names, so none is made
                        # again in their place: deleted now, made again at the next cycle.
                        work.remade.extend(
                            p.ref
                            for p in pods
                            if made_by_gpupool(p) and p.finished and not p.deleting
                        )
                continue
            held = [p for p in pods if holds_node(p)]
            if row.eviction_reason:
                if not held:
                    continue
                outstanding.add(name)
                before = None if name in evicted else self.evictions_sent.get(name)
                if before is not None and now - before < EVICT_RESEND_S:
                    continue
                sent[name] = now
                group = (
                    f"for {self.state.names.get(row.evicting_for_id, row.evicting_for_id)}"
                    if row.evicting_for_id is not None
                    else f"{row.eviction_reason} {name}"
                )
                entry = victims.setdefault(group, ([], [], row.eviction_reason))
                entry[0].append(name)
                entry[1].extend(p.ref for p in held)
                continue
            if row.state == running:
                if name in grows and self._grow_pods(row, pods, now, work, runs_wanted):
                    growing.add(name)
                    outstanding.add(name)
                continue
            if row.state == WorkloadState.ADMITTED:
                ours = row.origin == Origin.GPUPOOL
                if ours and (  # a member that ended on its node is no pod to make again
                    sum(1 for p in pods if made_by_gpupool(p) and (is_live(p) or p.node_name))
                    < row.info.pod_count
                ):
                    # Requeued and admitted again in one cycle: its pods are made first, and
                    # bound at the next cycle (else it looks lost, and is requeued, forever).
                    runs_wanted.append(row)
                    outstanding.add(name)
                    continue
                if not any(p.node_name is None and is_live(p) for p in pods):
                    # No pod waits for a node, so no gang to bind (``gang_bindings`` would say
                    # None): its pods are not grouped again for nothing.
                    if len(held) < len(row.info.placement):
                        outstanding.add(name)  # pods on their way: look again next cycle
                    continue
                grouped = None if row.origin == Origin.GPUPOOL else self.mirror.grouped(key, now)
                request = grouped if isinstance(grouped, WorkloadRequest) else None
                # One of gpupool's that ended on its node ran in this admission (an earlier
                # run's would have kept it pending: its name is taken, never made again), so
                # it holds its placement (``pods_by_set``); a Job's earlier pods hold nothing.
                gang = gang_bindings(row, pods, request, ended=ours)
                if gang is not None:
                    work.bind[name] = gang
                    outstanding.add(name)
                elif len(held) < len(row.info.placement):
                    outstanding.add(name)  # pods on their way: look again next cycle
        work.evict = victims
        # The explanation queue as ``_remember_written`` leaves it: the new reasons moved last.
        explained: list[str] = []
        budget = EVENTS_PER_CYCLE
        for name, detail in queued_explanations_due(self.explain_queue, fresh):
            if budget <= 0:
                break
            explained.append(name)
            row = rows[name] if name in rows else held_rows.get(name)
            if row is None or row.state != WorkloadState.PENDING:
                continue
            ours_only = row.origin == Origin.GPUPOOL  # others of its name are told otherwise
            message = detail if told is None else told(row, detail)
            for pod in self.mirror.pods_of(key_of(name)):
                if is_live(pod) and pod.node_name is None:  # a gang's pods all in one cycle
                    if ours_only and not made_by_gpupool(pod):
                        continue
                    work.events.append((pod.ref, "Waiting", message))
                    budget -= 1
        return PreparedApply(
            rows, work, outstanding, sent, explained, fresh, runs_wanted, unknown, growing
        )

    def _grow_pods(
        self,
        row: WorkloadRow,
        pods: list[PodFacts],
        now: float,
        work: ApplyWork,
        runs: list[WorkloadRow],
    ) -> bool:
        """The apply of a running elastic gang grown (``Plan.grow``), as an admission's: pods
        of a workload submitted through gpupool that do not exist yet are made (``runs``),
        and bound at the next cycle; the pods it added are bound as a gang of their own
        (``added_bindings``: the pods it runs are not in it, so a binding that fails never
        takes them down). Whether its added pods are still on their way (False: all are on
        their nodes, or the cluster put a pod elsewhere and the sync decides)."""
        placed = len(row.info.placement)
        if sum(1 for p in pods if p.node_name is not None) >= placed:
            return False  # every placed pod is on a node (ended ones hold theirs too)
        if row.origin == Origin.GPUPOOL and (  # a member that ended on its node is no pod
            # to make again: it holds its placement
            sum(1 for p in pods if made_by_gpupool(p) and (is_live(p) or p.node_name is not None))
            < placed
        ):
            runs.append(row)
            return True
        key = key_of(row.info.name)
        grouped = None if row.origin == Origin.GPUPOOL else self.mirror.grouped(key, now)
        gang = added_bindings(row, pods, grouped if isinstance(grouped, WorkloadRequest) else None)
        if gang is None:
            return False
        work.bind[row.info.name] = gang
        return True

    def _delete_if_cancelled(self, name: str, pods: list[Any], work: ApplyWork) -> None:
        live = [p for p in pods if is_live(p) or holds_node(p)]
        if not live:
            return
        cancelled = Workload.objects.filter(
            namespace=key_of(name).namespace, name=key_of(name).name, state=WorkloadState.CANCELLED
        ).exists()
        if cancelled:
            cancel_pods(work, (p for p in live if not p.deleting))
            self.outstanding.add(name)

    def _new_pods(self, rows: list[WorkloadRow]) -> list[Any]:
        """The pods still missing of workloads submitted through gpupool."""
        ids = [row.id for row in rows]
        sets: dict[int, list[PodSetRun]] = {}
        for (
            workload_id,
            name,
            count,
            gpus,
            milli,
            cpu,
            memory,
            sharing,
            profile,
            image,
            command,
            env,
        ) in (
            PodSet.objects.filter(workload_id__in=ids)
            .order_by("workload_id", "id")
            .values_list(
                "workload_id",
                "name",
                "count",
                "gpus",
                "gpu_milli",
                "cpu",
                "memory_gb",
                "flavor__sharing",
                "flavor__mig_profile",
                "image",
                "command",
                "env",
            )
        ):
            sets.setdefault(workload_id, []).append(
                PodSetRun(
                    name=name,
                    count=count,
                    image=image or DEFAULT_IMAGE,
                    command=tuple(command or ()),
                    env=dict(env or {}),
                    gpu_resource=gpu_resource(sharing or "", profile or ""),
                    gpus=gpus,
                    gpu_milli=milli,
                    cpu_milli=round(cpu * MILLI),
                    memory_mib=round(memory * 1024),
                )
            )
        pods: list[Any] = []
        for row in rows:
            info = row.info
            key = key_of(info.name)
            run = WorkloadRun(
                key=key,
                queue=info.queue,
                priority_class=info.priority_class,
                min_member=info.min_member,
                topology=info.topology or "",
                protected_runtime_s=round(info.protected_runtime_s),
                expected_runtime_s=None
                if info.expected_runtime_s is None
                else round(info.expected_runtime_s),
                pod_sets=tuple(sets.get(row.id, ())),
            )
            room = CREATES_PER_CYCLE - len(pods)
            if room <= 0:  # the rest at the next cycles (their workloads stay outstanding)
                break
            pods.extend(new_pods(run, (p.name for p in self.mirror.pods_of(key)), limit=room))
        return pods

    # -- the cycle row -----------------------------------------------------------------------

    def _finish(
        self,
        cycle: SchedulingCycle,
        result: CycleResult,
        record: CycleRecord,
        database: DatabaseSnapshot,
        shares: Mapping[str, Mapping[str, QueueShare]],
        fragmentation: Mapping[str, Mapping[str, float]] | None,
    ) -> None:
        carried = self.totals if self.totals is not None else metrics.carried_totals()
        totals = metrics.add_to_totals(carried, result, record)
        self.totals = None  # until the row carrying them is written
        do_finish_cycle(
            cycle,
            at=timezone.now(),
            status=CycleStatus.SUCCEEDED,
            nodes=result.counts.get("nodes", 0),
            workloads=result.counts.get("workloads", 0),
            admitted=len(record.admissions),
            evicted=result.counts.get("evicted", 0),  # less those a budget refused
            pending=sum(record.pending_by_reason.values()),
            timings=result.timings,
            outcome={
                "counts": dict(result.counts),
                "pending_by_reason": dict(record.pending_by_reason),
                # The pipeline: how long the cycle waited for the last cycle's apply.
                "apply_wait_s": round(result.timings.get("apply_wait", 0.0), 6),
                "cpu_s": round(result.cpu_s, 6),
                "queues": metrics.queue_gauges(shares),
                "refused_pods": self._refused_pods(),
            }
            | (
                {}
                if fragmentation is None
                else {"fragmentation": {flavor: dict(f) for flavor, f in fragmentation.items()}}
            ),
            totals=totals,
        )
        self.totals = totals

    def _refused_pods(self) -> dict[str, Any]:
        """The workloads whose waiting pods gpupool will not schedule, and why: the sync's
        complaints (each sent once as a Warning Event) about pods that are no live workload of
        the database (refused at registration, or of a workload that has ended), while such
        pods wait; the first ``REFUSED_PODS_KEPT`` by name, and how many there are. The pages
        read them from the cycle's record (``control.queries.refused_pods``): such pods are no
        workload, so nothing else shows them. Complaints about pods that are gone are
        forgotten (the same pods made again are complained about again)."""
        rows = self.state.rows
        refused: list[dict[str, Any]] = []
        gone = []
        for key, why in self.memory.complaints.items():
            name = str(key)
            if name in rows:
                continue  # a live workload (its protected runtime capped): it is scheduled
            pods = self.mirror.pods_of(key)
            if not pods:
                gone.append(key)
                continue
            waiting = sum(1 for pod in pods if is_live(pod) and pod.node_name is None)
            if waiting:
                refused.append({"workload": name, "pods": waiting, "why": why})
        for key in gone:
            del self.memory.complaints[key]
        refused.sort(key=lambda entry: entry["workload"])
        return {"count": len(refused), "workloads": refused[:REFUSED_PODS_KEPT]}

    def _forget_everything(self) -> None:
        """After a failed cycle, read everything again next time (the state may be partial)."""
        self.state = LoopState(self.policy)
        self.budgets = BudgetBook()
        self.latest = None
        self.ranks = None
        self.totals = None
        self.first = True
        self.foreign_recorded = None

    def refresh_estimates(self) -> EstimateRun:
        """Estimated starts of every pending workload, from the last cycle's snapshot
        (``estimates.py``); off the cycle's critical path, between cycles."""
        with gc_paused():
            return self.estimates.refresh(self.latest)

    def close(self) -> None:
        """Finish an apply still running, then release the backend."""
        try:
            self.finish_apply()
        finally:
            if self._applier is not None:
                self._applier.shutdown(wait=True)
            self.backend.close()
