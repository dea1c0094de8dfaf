"""A virtual-time replay of gang jobs through the decision core (``plan``).

Jobs arrive, wait in their queue, run for their recorded duration and finish. The simulator
never decides anything itself: at every instant something can change it builds a
``Snapshot`` of the cluster, calls ``gpupool.scheduler.plan`` and carries the plan out with
the core's own ``lifecycle.apply_plan`` in virtual time (admissions start at once, evictions
take effect at once, a running elastic gang the plan grows holds its added pods at once and
ends when it would have); the replay's records only add what a trace needs on top
(segments, progress lost to evictions, completion events).

When cycles run. A cycle runs at every instant a job arrives or finishes, and at every
instant a time-based condition of the policy changes while work is pending: a protected
window ends, a starvation limit is crossed, a back-off cool-down or a victim protection
lapses. The replay does not derive those instants itself: after each instant it asks the core
(``lifecycle.next_change_at``, over the timers in ``contracts.py``) when the next one is.
Between two such instants ``plan`` sees the same state and would decide the same
thing, so this equals a periodic cycle with the idle cycles skipped (the product's periodic
beat only adds up to one period of latency; ``tick_s`` adds such a beat to check that).
After a cycle that evicted, another cycle runs at the same instant: the preemptor is then
nominated and admitted on the capacity its victims freed (evictions here take no time).

Preemption. An evicted job goes back to pending with its original submit time and keeps the
progress up to its last checkpoint: work since then (``run % checkpoint_s``) is lost. Each
running job reports its last checkpoint to the core (``last_checkpoint_at``), which prefers
victims that would lose the least.

Strict FIFO is a setting of the core (``policy.queueing = "fifo"``), not of the simulator.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from gpupool.runtime import gc_paused
from gpupool.scheduler import plan
from gpupool.scheduler.contracts import history_horizon
from gpupool.scheduler.lifecycle import apply_plan, next_change_at
from gpupool.scheduler.types import (
    MILLI,
    SECONDS_PER_HOUR,
    FlavorInfo,
    NodeInfo,
    PodPlacement,
    PodSetInfo,
    PolicyInfo,
    PreemptionEventInfo,
    PriorityClassInfo,
    QueueInfo,
    Snapshot,
    Topology,
    WorkloadInfo,
)

DEFAULT_CHECKPOINT_S = 1800.0
MAX_EVICTING_CYCLES_PER_INSTANT = 50  # a safety net; never reached in B3

ARRIVAL, COMPLETION, WAKE, CYCLE = 0, 1, 2, 3


class UnfinishedJobsError(RuntimeError):
    """The replay ran out of events with jobs that never finished (e.g. a gang larger than
    its queue may ever hold, or a policy without the allocate phase)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        shown = ", ".join(self.names[:3]) + (", ..." if len(self.names) > 3 else "")
        super().__init__(f"{len(self.names)} jobs never finish ({shown})")


@dataclass(frozen=True, slots=True)
class SimJob:
    """One job of a replay: a gang of pod sets, its queue, submit time and run time."""

    name: str
    queue: str
    pod_sets: tuple[PodSetInfo, ...]
    submitted_at: float
    duration_s: float
    priority_class: str = "normal"
    topology: Topology | None = None
    protected_runtime_s: float | None = None  # None: what the policy gives every job
    min_member: int | None = None  # an elastic gang's minimum (None: all its pods together)

    @property
    def gpus(self) -> float:
        """GPUs the job holds while it runs (shared fractions count their share)."""
        return sum(p.count * p.gpus * p.gpu_milli for p in self.pod_sets) / MILLI


@dataclass(frozen=True, slots=True)
class ClusterSetup:
    """The simulated pool: flavors, nodes, the queue tree and the priority classes."""

    flavors: tuple[FlavorInfo, ...]
    nodes: tuple[NodeInfo, ...]
    queues: tuple[QueueInfo, ...]
    priority_classes: tuple[PriorityClassInfo, ...] = (
        PriorityClassInfo("normal", 0, default=True),
    )

    @property
    def gpus(self) -> int:
        """Healthy GPUs of the pool."""
        return sum(node.healthy_gpus for node in self.nodes)


@dataclass(frozen=True, slots=True)
class SimPolicy:
    """A scheduling policy as settings of the one core: its knobs and what jobs declare."""

    name: str
    policy: PolicyInfo = field(default_factory=PolicyInfo)
    protected_runtime_s: float = 0.0


@dataclass(slots=True)
class JobRecord:
    """What happened to one job: when it started, ran and finished, and what it lost."""

    job: SimJob
    remaining_s: float
    state: str = "waiting"  # waiting (not yet arrived), pending, running, finished
    first_started_at: float | None = None
    finished_at: float | None = None
    segment_start: float | None = None
    segment: int = 0
    placement: tuple[PodPlacement, ...] = ()
    run_s: float = 0.0
    evictions: int = 0
    lost_s: float = 0.0
    nominated: bool = False
    info: WorkloadInfo | None = None
    held_since: float | None = None  # since when it holds its pods now (it grew: not its start)

    @property
    def held_gpus(self) -> float:
        """GPUs the running job holds: all of its gang's, or an elastic gang's first pods."""
        job = self.job
        placed = len(self.placement)
        if placed >= sum(p.count for p in job.pod_sets):
            return job.gpus
        held = 0
        for pod_set in job.pod_sets:
            pods = min(placed, pod_set.count)
            held += pods * pod_set.gpus * pod_set.gpu_milli
            placed -= pods
        return held / MILLI

    @property
    def jct_s(self) -> float:
        """Job completion time: finish minus submit."""
        assert self.finished_at is not None
        return self.finished_at - self.job.submitted_at

    @property
    def wait_s(self) -> float:
        """Queueing delay: all the time it spent pending (before its first start and after
        every eviction)."""
        return self.jct_s - self.run_s

    @property
    def lost_gpu_hours(self) -> float:
        """GPU-hours of progress thrown away by evictions."""
        return self.lost_s * self.job.gpus / SECONDS_PER_HOUR


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of time a job held GPUs (ended by completion or eviction)."""

    start: float
    end: float
    gpus: float
    queue: str


@dataclass(slots=True)
class ReplayOutcome:
    """Every job's record, the GPU segments, and counts of the replay."""

    policy: str
    capacity_gpus: int
    records: list[JobRecord]
    segments: list[Segment]
    preemptions: int
    cycles: int
    plan_s: float
    makespan_s: float
    capped_instants: int = 0  # instants that hit MAX_EVICTING_CYCLES_PER_INSTANT


def checkpointed_progress(run_s: float, checkpoint_s: float) -> float:
    """Seconds of a run kept across an eviction: up to its last checkpoint."""
    if checkpoint_s <= 0:
        return run_s
    return math.floor(run_s / checkpoint_s + 1e-9) * checkpoint_s


class JobReplay:
    """The state of one replay in virtual time; ``run()`` drives it to the end."""

    def __init__(
        self,
        jobs: Sequence[SimJob],
        cluster: ClusterSetup,
        sim_policy: SimPolicy,
        *,
        checkpoint_s: float = DEFAULT_CHECKPOINT_S,
        tick_s: float | None = None,
        cycle_s: float = 0.0,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.cycle_s = cycle_s
        self.next_cycle: float | None = None
        self.sim_policy = sim_policy
        self.policy = sim_policy.policy
        self.checkpoint_s = checkpoint_s
        self.tick_s = tick_s
        self.on_progress = on_progress
        self.records = {job.name: JobRecord(job, job.duration_s) for job in jobs}
        if len(self.records) != len(jobs):
            raise ValueError("job names must be unique")
        self.events: list[tuple[float, int, int, str, int]] = []
        self.sequence = 0
        for job in sorted(jobs, key=lambda j: (j.submitted_at, j.name)):
            self._push(job.submitted_at, ARRIVAL, job.name)
        self.pending: dict[str, JobRecord] = {}
        self.running: dict[str, JobRecord] = {}
        # Running elastic gangs with fewer pods than they have: a cycle may grow them.
        self.partial: set[str] = set()
        self.history: deque[PreemptionEventInfo] = deque()
        self.segments: list[Segment] = []
        self.preemptions = 0
        self.capped_instants = 0
        self.cycles = 0
        self.plan_s = 0.0
        self.finished = 0
        self.now = 0.0
        self._last_wake: float | None = None

    def _push(self, at: float, kind: int, name: str = "", segment: int = 0) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (at, kind, self.sequence, name, segment))

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> ReplayOutcome:
        """Process events in time order until every job has finished."""
        import time

        total = len(self.records)
        while self.events:
            now = self.events[0][0]
            self.now = now
            changed = cycle = False
            while self.events and self.events[0][0] == now:
                _, kind, _, name, segment = heapq.heappop(self.events)
                if kind == CYCLE:
                    cycle = True
                    self.next_cycle = None
                elif kind == ARRIVAL:
                    record = self.records[name]
                    record.state = "pending"
                    self.pending[name] = record
                    changed = True
                elif kind == COMPLETION:
                    record = self.records[name]
                    if record.state == "running" and record.segment == segment:
                        self._finish(record, now)
                        changed = True
                elif self.pending:
                    changed = True
            if changed:
                self._request_cycle(now)
            if cycle and (self.pending or self.partial):
                started = time.perf_counter()
                self._cycles(now)
                self.plan_s += time.perf_counter() - started
            if self.tick_s is not None and self.pending:
                self._push(now + self.tick_s, WAKE)
            if self.pending:
                # The core says when a timer of its contracts next changes a decision.
                wake = next_change_at(self._snapshot(now), self.policy, now)
                if wake is not None and wake != self._last_wake:
                    self._last_wake = wake
                    self._push(wake, WAKE)
            if self.on_progress is not None:
                self.on_progress(self.finished, total)
        unfinished = [r.job.name for r in self.records.values() if r.state != "finished"]
        if unfinished:
            raise UnfinishedJobsError(unfinished)
        return ReplayOutcome(
            policy=self.sim_policy.name,
            capacity_gpus=self.cluster.gpus,
            records=list(self.records.values()),
            segments=self.segments,
            preemptions=self.preemptions,
            cycles=self.cycles,
            plan_s=self.plan_s,
            makespan_s=self.now,
            capped_instants=self.capped_instants,
        )

    def _request_cycle(self, now: float) -> None:
        """Ask for a cycle at this instant, or at the next beat of ``cycle_s``."""
        at = now
        if self.cycle_s > 0:
            at = math.ceil(now / self.cycle_s - 1e-9) * self.cycle_s
        if self.next_cycle is None or at < self.next_cycle:
            self.next_cycle = at
            self._push(at, CYCLE)

    def _cycles(self, now: float) -> None:
        """Run cycles at this instant until one does not evict."""
        evicting_rounds = 0
        while (self.pending or self.partial) and evicting_rounds < MAX_EVICTING_CYCLES_PER_INSTANT:
            _, evicted = self._cycle(now)
            if not evicted:
                return
            evicting_rounds += 1
            self.capped_instants += evicting_rounds == MAX_EVICTING_CYCLES_PER_INSTANT

    def _cycle(self, now: float) -> tuple[int, int]:
        """One call of the core, its plan carried out by ``lifecycle.apply_plan``."""
        self.cycles += 1
        before = self._snapshot(now)
        with gc_paused():  # as the control loop runs the core (gpupool.runtime)
            result = plan(before, self.policy, now)
        after = apply_plan(before, result, now)
        self.history.extend(after.preemption_history[len(before.preemption_history) :])
        waiting = [p.workload for p in result.pending if p.reason == "waiting-for-preemption"]
        moved = {admission.workload for admission in result.admit}
        moved.update(eviction.workload for eviction in result.evict)
        moved.update(growth.workload for growth in result.grow)
        moved.update(waiting)
        applied = {info.name: info for info in after.workloads if info.name in moved}
        for eviction in result.evict:
            self._evict(self.running[eviction.workload], now, applied[eviction.workload])
        for name in waiting:  # preemptors held on what their victims free
            record = self.records[name]
            record.nominated = True
            record.info = applied[name]
        for admission in result.admit:
            self._start(self.pending[admission.workload], now, applied[admission.workload])
        for growth in result.grow:
            self._grow(self.running[growth.workload], now, applied[growth.workload])
        return len(result.admit), len(result.evict)

    # -- snapshot ----------------------------------------------------------------------------

    def _snapshot(self, now: float) -> Snapshot:
        """The cluster as the core sees it now."""
        pending = self.pending.values()
        workloads = [self._info(r, now) for r in self.running.values()]
        workloads.extend(self._info(r, now) for r in pending)
        horizon = history_horizon(self.policy)
        while self.history and self.history[0].at < now - horizon:
            self.history.popleft()
        return Snapshot(
            flavors=self.cluster.flavors,
            nodes=self.cluster.nodes,
            queues=self.cluster.queues,
            priority_classes=self.cluster.priority_classes,
            workloads=tuple(workloads),
            preemption_history=tuple(self.history),
        )

    def last_checkpoint(self, record: JobRecord, now: float) -> float | None:
        """When the running job last checkpointed in this run (None: not yet)."""
        start = record.segment_start
        if start is None or self.checkpoint_s <= 0:
            return None
        kept = checkpointed_progress(now - start, self.checkpoint_s)
        return start + kept if kept > 0 else None

    def _info(self, record: JobRecord, now: float) -> WorkloadInfo:
        """The job as a ``WorkloadInfo`` (cached until its state or checkpoint changes)."""
        info = record.info
        if info is not None and info.state == "running":
            checkpoint = self.last_checkpoint(record, now)
            if checkpoint != info.last_checkpoint_at:
                info = record.info = replace(info, last_checkpoint_at=checkpoint)
            return info
        if record.info is None:
            job = record.job
            running = record.state == "running"
            record.info = WorkloadInfo(
                name=job.name,
                queue=job.queue,
                priority_class=job.priority_class,
                pod_sets=job.pod_sets,
                submitted_at=job.submitted_at,
                state="running" if running else "pending",
                topology=job.topology,
                min_member=job.min_member,
                protected_runtime_s=self._protection(job),
                expected_runtime_s=record.remaining_s,
                started_at=record.segment_start if running else None,
                last_checkpoint_at=self.last_checkpoint(record, now) if running else None,
                placement=record.placement if running else (),
                nominated=record.nominated and not running,
            )
        return record.info

    def _protection(self, job: SimJob) -> float:
        """The protected runtime the job declares (the policy's when it declares none)."""
        if job.protected_runtime_s is not None:
            return job.protected_runtime_s
        return self.sim_policy.protected_runtime_s

    # -- transitions -------------------------------------------------------------------------

    def _start(self, record: JobRecord, now: float, info: WorkloadInfo) -> None:
        del self.pending[record.job.name]
        self.running[record.job.name] = record
        record.state = "running"
        record.segment += 1
        record.segment_start = now
        record.placement = info.placement
        record.nominated = False
        record.info = info
        if len(info.placement) < info.pod_count:
            self.partial.add(record.job.name)
        if record.first_started_at is None:
            record.first_started_at = now
        self._push(now + record.remaining_s, COMPLETION, record.job.name, record.segment)

    def _grow(self, record: JobRecord, now: float, info: WorkloadInfo) -> None:
        """A running elastic job adds the pods the plan grew it by: it holds more GPUs from
        now (a new segment), and still ends when its run time is done (its completion event
        stays: a trace's duration is its job's, whatever its pods)."""
        assert record.segment_start is not None
        since = record.segment_start if record.held_since is None else record.held_since
        self.segments.append(Segment(since, now, record.held_gpus, record.job.queue))
        record.held_since = now
        record.placement = info.placement
        record.info = info
        if len(info.placement) >= info.pod_count:
            self.partial.discard(record.job.name)

    def _stop(self, record: JobRecord, now: float) -> float:
        """End the running segment; return its length."""
        assert record.segment_start is not None
        ran = now - record.segment_start
        del self.running[record.job.name]
        self.partial.discard(record.job.name)
        record.run_s += ran
        since = record.segment_start if record.held_since is None else record.held_since
        self.segments.append(Segment(since, now, record.held_gpus, record.job.queue))
        record.segment_start = None
        record.held_since = None
        record.placement = ()
        record.info = None
        return ran

    def _finish(self, record: JobRecord, now: float) -> None:
        self._stop(record, now)
        record.remaining_s = 0.0
        record.state = "finished"
        record.finished_at = now
        self.finished += 1

    def _evict(self, record: JobRecord, now: float, info: WorkloadInfo) -> None:
        """The job is pending again, keeping its progress up to its last checkpoint (its
        preemption event is in the history that ``apply_plan`` extended)."""
        ran = self._stop(record, now)
        kept = min(checkpointed_progress(ran, self.checkpoint_s), record.remaining_s)
        record.lost_s += ran - kept
        record.remaining_s -= kept
        record.evictions += 1
        record.state = "pending"
        record.nominated = False
        record.info = replace(info, expected_runtime_s=record.remaining_s)
        self.pending[record.job.name] = record
        self.preemptions += 1


def replay_jobs(
    jobs: Sequence[SimJob],
    cluster: ClusterSetup,
    sim_policy: SimPolicy,
    *,
    checkpoint_s: float = DEFAULT_CHECKPOINT_S,
    tick_s: float | None = None,
    cycle_s: float = 0.0,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReplayOutcome:
    """Replay ``jobs`` on ``cluster`` under ``sim_policy`` until all have finished."""
    return JobReplay(
        jobs,
        cluster,
        sim_policy,
        checkpoint_s=checkpoint_s,
        tick_s=tick_s,
        cycle_s=cycle_s,
        on_progress=on_progress,
    ).run()
