"""What-if: replay recorded demand under today's quotas and policy and under a proposed change.

An admin deciding a quota request asks "what would last month have looked like with this
change?" (DESIGN section 6). ``replay_whatif`` answers it with the same machinery as B3: the
demand (jobs with submit time, pod sets and run time) is replayed through the decision core
twice, once with the baseline queue tree and scheduling policy and once with the proposed
ones (quota changes, policy changes, or both), and per tenant the waits and GPU use are put
side by side. Everything here is plain data: the API, the
dashboard and ``manage.py gpupool simulate whatif`` build the demand and the queues (from the
database, or from a trace) and call this.

**Work that never fits.** Each replay leaves out the jobs that its own setup can never run,
as the control loop's cycles do: the core's enqueue sets aside a gang that a capability on its
queue's path, or the pool, could never hold (``scheduler.explain.never_fits``), and so does
``set_aside`` here, by asking the core (one ``plan`` of the setup with every job pending and
only the enqueue phase), never by reading the quotas a second time. So a job the pool's
queues can never hold today is left out of today's replay, and counted with the core's reason
(``WhatIfResult.set_aside_before``), instead of the replay failing with "jobs never finish";
and a proposal that raises the capability it needs lets it in, which is what the what-if is
asked to show. A proposal that lowers a capability below what a job needs sets that job aside
in the proposed replay, and says so.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from gpupool.scheduler import plan
from gpupool.scheduler.explain import never_fits
from gpupool.scheduler.scenario import policy_from_dict
from gpupool.scheduler.types import (
    MILLI,
    SECONDS_PER_HOUR,
    FlavorInfo,
    NodeInfo,
    PolicyInfo,
    PriorityClassInfo,
    QueueInfo,
    QuotaInfo,
    Snapshot,
    WorkloadInfo,
)
from gpupool.simulation.queueing.events import (
    DEFAULT_CHECKPOINT_S,
    ClusterSetup,
    ReplayOutcome,
    SimJob,
    SimPolicy,
    UnfinishedJobsError,
    replay_jobs,
)
from gpupool.simulation.queueing.metrics import deserved_gpus, held_gpu_seconds, mean, percentile

DEFAULT_POLICY = SimPolicy("gpupool", PolicyInfo())
DEFAULT_PRIORITY_CLASSES = (PriorityClassInfo("normal", 0, default=True),)
SET_ASIDE_NAMED = 20  # jobs a result names per replay (all are counted)


@dataclass(frozen=True, slots=True)
class QuotaChange:
    """A proposed quota of one queue and flavor, in GPUs (None: keep the current value)."""

    queue: str
    flavor: str
    deserved: float | None = None
    capability: float | None = None
    guarantee: float | None = None


_CHANGE = re.compile(r"^(?P<queue>[^:]+):(?P<flavor>[^:]+):(?P<levels>.+)$")


def parse_quota_change(text: str) -> QuotaChange:
    """``QUEUE:FLAVOR:deserved=N[,capability=M][,guarantee=G]`` as a ``QuotaChange``."""
    match = _CHANGE.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r}: expected QUEUE:FLAVOR:deserved=N[,capability=M]")
    levels: dict[str, float] = {}
    for part in match["levels"].split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in ("deserved", "capability", "guarantee"):
            raise ValueError(f"{text!r}: unknown quota level {part!r}")
        try:
            amount = float(value)
        except ValueError:
            raise ValueError(f"{text!r}: {key} must be a number of GPUs, not {value!r}") from None
        if amount < 0 or not math.isfinite(amount):
            raise ValueError(f"{text!r}: {key} must be a non-negative number of GPUs")
        levels[key] = amount
    return QuotaChange(match["queue"], match["flavor"], **levels)


def apply_changes(
    queues: Sequence[QueueInfo],
    changes: Sequence[QuotaChange],
    flavors: Collection[str] | None = None,
) -> tuple[QueueInfo, ...]:
    """The queue tree with the changes applied; refuses unknown queues, flavors not among
    ``flavors`` (when given: a quota of a flavor no node has changes nothing) or disordered
    levels.

    A queue without quota for the flavor gets one (unset levels default to 0 guarantee and
    capability = deserved).
    """
    by_name = {queue.name: queue for queue in queues}
    for change in changes:
        queue = by_name.get(change.queue)
        if queue is None:
            raise ValueError(f"unknown queue {change.queue!r}; have {sorted(by_name)}")
        if flavors is not None and change.flavor not in flavors:
            raise ValueError(f"unknown flavor {change.flavor!r}; have {sorted(flavors)}")
        current = queue.quota.get(change.flavor)
        guarantee = _milli(change.guarantee, current.guarantee if current else 0)
        deserved = _milli(change.deserved, current.deserved if current else 0)
        if change.capability is not None:
            capability = _milli(change.capability, 0)
        elif current is not None:
            capability = max(current.capability, deserved)
        else:
            capability = deserved
        if not guarantee <= deserved <= capability:
            raise ValueError(
                f"{change.queue}:{change.flavor}: need guarantee <= deserved <= capability, got "
                f"{guarantee / MILLI:g} / {deserved / MILLI:g} / {capability / MILLI:g}"
            )
        quota = {**queue.quota, change.flavor: QuotaInfo(guarantee, deserved, capability)}
        by_name[change.queue] = replace(queue, quota=quota)
    return tuple(by_name[queue.name] for queue in queues)


# Keys of a scenario's policy object that name a PolicyInfo field differently.
# Scenario policy keys that name other PolicyInfo fields ("fair_sharing" sets two).
_POLICY_FIELDS: dict[str, tuple[str, ...]] = {
    "preemption_backoff": ("backoff",),
    "fair_sharing": ("queue_order", "fair_reclaim"),
}


def parse_policy_change(text: str) -> tuple[str, object]:
    """``KEY=VALUE`` for one key of the scenario format's ``policy`` object.

    The value is read as JSON when it is JSON (``false``, ``21600``, ``null``,
    ``["enqueue", "allocate"]``), else as a string (``fifo``); `apply_policy_changes` checks it.
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ValueError(f"{text!r}: expected KEY=VALUE, e.g. queueing=fifo")
    try:
        parsed: object = json.loads(value)
    except ValueError:
        parsed = value.strip()
    return key, parsed


def apply_policy_changes(policy: PolicyInfo, changes: Mapping[str, object]) -> PolicyInfo:
    """``policy`` with the given keys replaced; unknown keys and bad values are refused
    (``ValueError`` naming ``policy.<key>``), keys not given keep the baseline's value."""
    proposed = policy_from_dict(dict(changes))
    fields = [name for key in changes for name in _POLICY_FIELDS.get(key, (key,))]
    result = replace(policy, **{name: getattr(proposed, name) for name in fields})
    if "allocate" not in result.phases:
        raise ValueError("policy.phases: must include 'allocate', or nothing is ever admitted")
    return result


def _milli(gpus: float | None, current: int) -> int:
    return current if gpus is None else round(gpus * MILLI)


@dataclass(frozen=True, slots=True)
class TenantFigures:
    """One tenant's outcome in one replay."""

    jobs: int
    wait_mean_s: float
    wait_p99_s: float
    jct_mean_s: float
    gpu_hours: float
    deserved_gpus: float
    utilisation_of_deserved: float | None

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON."""
        util = self.utilisation_of_deserved
        return {
            "jobs": self.jobs,
            "wait_mean_s": round(self.wait_mean_s, 1),
            "wait_p99_s": round(self.wait_p99_s, 1),
            "jct_mean_s": round(self.jct_mean_s, 1),
            "gpu_hours": round(self.gpu_hours, 2),
            "deserved_gpus": self.deserved_gpus,
            "utilisation_of_deserved": None if util is None else round(util, 4),
        }


@dataclass(frozen=True, slots=True)
class PoolFigures:
    """The whole pool's outcome in one replay."""

    wait_mean_s: float
    wait_p99_s: float
    jct_mean_s: float
    utilisation: float
    preemptions: int
    gpu_hours_lost: float

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON."""
        return {
            "wait_mean_s": round(self.wait_mean_s, 1),
            "wait_p99_s": round(self.wait_p99_s, 1),
            "jct_mean_s": round(self.jct_mean_s, 1),
            "utilisation": round(self.utilisation, 4),
            "preemptions": self.preemptions,
            "gpu_hours_lost": round(self.gpu_hours_lost, 2),
        }


@dataclass(frozen=True, slots=True)
class WhatIfResult:
    """Before (baseline) and after (proposed quotas and policy), pool-wide and per tenant."""

    jobs: int
    window_s: float
    pool_gpus: int
    before: PoolFigures
    after: PoolFigures
    tenants_before: Mapping[str, TenantFigures]
    tenants_after: Mapping[str, TenantFigures]
    changes: tuple[QuotaChange, ...] = field(default=())
    policy_changes: Mapping[str, object] = field(default_factory=dict)
    # Jobs each replay left out as never fitting its setup (``set_aside``): today's, proposed.
    set_aside_before: tuple[SetAside, ...] = field(default=())
    set_aside_after: tuple[SetAside, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """The comparison as JSON: pool figures, what each replay set aside as never
        fitting, then per tenant before and after."""
        tenants = sorted(set(self.tenants_before) | set(self.tenants_after))
        return {
            "jobs": self.jobs,
            "window_s": self.window_s,
            "pool_gpus": self.pool_gpus,
            "set_aside": {
                "before": set_aside_json(self.set_aside_before),
                "after": set_aside_json(self.set_aside_after),
            },
            "changes": [
                {k: v for k, v in vars_of(change).items() if v is not None}
                for change in self.changes
            ],
            "policy_changes": dict(self.policy_changes),
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "tenants": {
                t: {
                    "before": _figures_json(self.tenants_before.get(t)),
                    "after": _figures_json(self.tenants_after.get(t)),
                }
                for t in tenants
            },
        }


def vars_of(change: QuotaChange) -> dict[str, Any]:
    """A quota change as a dict."""
    return {
        "queue": change.queue,
        "flavor": change.flavor,
        "guarantee": change.guarantee,
        "deserved": change.deserved,
        "capability": change.capability,
    }


def _figures_json(figures: TenantFigures | None) -> dict[str, Any] | None:
    return None if figures is None else figures.to_json()


def _figures(
    outcome: ReplayOutcome, cluster: ClusterSetup, window_s: float
) -> tuple[PoolFigures, dict[str, TenantFigures]]:
    tenant_of = {q.name: q.tenant or q.name for q in cluster.queues}
    deserved = deserved_gpus(cluster.queues)
    records = outcome.records
    pool = PoolFigures(
        wait_mean_s=mean([r.wait_s for r in records]),
        wait_p99_s=percentile([r.wait_s for r in records], 99),
        jct_mean_s=mean([r.jct_s for r in records]),
        utilisation=(
            held_gpu_seconds(outcome.segments, 0.0, window_s) / (cluster.gpus * window_s)
            if cluster.gpus and window_s
            else 0.0
        ),
        preemptions=outcome.preemptions,
        gpu_hours_lost=sum(r.lost_gpu_hours for r in records),
    )
    grouped: dict[str, list[Any]] = defaultdict(list)
    for record in records:
        grouped[tenant_of.get(record.job.queue, record.job.queue)].append(record)
    segments: dict[str, list[Any]] = defaultdict(list)
    for segment in outcome.segments:
        segments[tenant_of.get(segment.queue, segment.queue)].append(segment)
    tenants: dict[str, TenantFigures] = {}
    for tenant, mine in sorted(grouped.items()):
        held = held_gpu_seconds(segments[tenant], 0.0, window_s)
        share = deserved.get(tenant, 0.0)
        tenants[tenant] = TenantFigures(
            jobs=len(mine),
            wait_mean_s=mean([r.wait_s for r in mine]),
            wait_p99_s=percentile([r.wait_s for r in mine], 99),
            jct_mean_s=mean([r.jct_s for r in mine]),
            gpu_hours=held / SECONDS_PER_HOUR,
            deserved_gpus=share,
            utilisation_of_deserved=held / (share * window_s) if share and window_s else None,
        )
    return pool, tenants


@dataclass(frozen=True, slots=True)
class SetAside:
    """A job a replay left out because its setup can never run it: the core's reason
    (``quota``: a capability on its queue's path; ``capacity``: the pool) and sentence."""

    job: str
    queue: str
    reason: str
    detail: str

    def to_json(self) -> dict[str, str]:
        """The job and why, as JSON."""
        return {"job": self.job, "queue": self.queue, "reason": self.reason, "detail": self.detail}


def set_aside(
    demand: Sequence[SimJob], cluster: ClusterSetup, policy: PolicyInfo
) -> tuple[SetAside, ...]:
    """The jobs of ``demand`` that the core sets aside on ``cluster`` as never fitting, in
    the demand's order: the enqueue phase of one cycle with every job pending (what it
    decides depends only on the queue tree, the nodes and the job's shape, so it holds for
    the whole replay). None when ``policy`` runs no enqueue phase: then the core sets nothing
    aside, and neither does the replay."""
    if not demand or "enqueue" not in policy.phases:
        return ()
    pending = tuple(
        WorkloadInfo(
            name=job.name,
            queue=job.queue,
            priority_class=job.priority_class,
            pod_sets=job.pod_sets,
            submitted_at=job.submitted_at,
            topology=job.topology,
        )
        for job in demand
    )
    snapshot = Snapshot(
        flavors=cluster.flavors,
        nodes=cluster.nodes,
        queues=cluster.queues,
        priority_classes=cluster.priority_classes,
        workloads=pending,
    )
    verdicts = plan(snapshot, replace(policy, phases=("enqueue",)), 0.0).pending
    never = {p.workload: p for p in verdicts if never_fits(p.facts)}
    return tuple(
        SetAside(job.name, job.queue, never[job.name].reason, never[job.name].detail)
        for job in demand
        if job.name in never
    )


def set_aside_json(jobs: Sequence[SetAside]) -> dict[str, Any]:
    """How many jobs a replay left out, how many for each of the core's reasons, and the
    first ``SET_ASIDE_NAMED`` of them with the core's sentence."""
    reasons: dict[str, int] = defaultdict(int)
    for job in jobs:
        reasons[job.reason] += 1
    return {
        "count": len(jobs),
        "reasons": dict(sorted(reasons.items())),
        "jobs": [job.to_json() for job in jobs[:SET_ASIDE_NAMED]],
    }


def replay_whatif(
    demand: Sequence[SimJob],
    baseline_queues: Sequence[QueueInfo],
    proposed_queues: Sequence[QueueInfo],
    *,
    nodes: Sequence[NodeInfo],
    flavors: Sequence[FlavorInfo],
    priority_classes: Sequence[PriorityClassInfo] = DEFAULT_PRIORITY_CLASSES,
    policy: SimPolicy = DEFAULT_POLICY,
    proposed_policy: SimPolicy | None = None,
    window_s: float | None = None,
    checkpoint_s: float = DEFAULT_CHECKPOINT_S,
    changes: Sequence[QuotaChange] = (),
    policy_changes: Mapping[str, object] | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> WhatIfResult:
    """Replay ``demand`` with the baseline queues and ``policy``, then with the proposed
    queues and ``proposed_policy`` (default: the same policy); compare per tenant.

    ``window_s`` is the span utilisation is measured over (default: up to the last arrival,
    at least one second). ``changes`` and ``policy_changes`` are only echoed in the result.
    ``on_progress(run, finished, total)`` is told, as each replay (``today``, then
    ``proposed``) goes, how many of its jobs have finished.
    Each replay leaves out the jobs its own setup can never run (``set_aside``, the core's
    rule) and the result says which (``set_aside_before``, ``set_aside_after``); a setup
    under which some other jobs still never finish (a policy without the allocate phase) is
    refused (``ValueError`` saying which, today's or the proposed, and the first jobs).
    """
    if window_s is None:
        window_s = max([job.submitted_at for job in demand] + [1.0])
    results: list[tuple[PoolFigures, dict[str, TenantFigures]]] = []
    left_out: list[tuple[SetAside, ...]] = []
    pool_gpus = 0
    runs = (
        ("today", baseline_queues, policy),
        ("proposed", proposed_queues, proposed_policy or policy),
    )
    for label, queues, run_policy in runs:
        cluster = ClusterSetup(
            flavors=tuple(flavors),
            nodes=tuple(nodes),
            queues=tuple(queues),
            priority_classes=tuple(priority_classes),
        )
        pool_gpus = cluster.gpus
        never = set_aside(demand, cluster, run_policy.policy)
        left_out.append(never)
        names = {job.job for job in never}
        try:
            outcome = replay_jobs(
                [job for job in demand if job.name not in names] if names else demand,
                cluster,
                run_policy,
                checkpoint_s=checkpoint_s,
                on_progress=None if on_progress is None else partial(on_progress, label),
            )
        except UnfinishedJobsError as error:
            raise ValueError(f"{label}: {error}") from error
        results.append(_figures(outcome, cluster, window_s))
    (before, tenants_before), (after, tenants_after) = results
    return WhatIfResult(
        jobs=len(demand),
        window_s=window_s,
        pool_gpus=pool_gpus,
        before=before,
        after=after,
        tenants_before=tenants_before,
        tenants_after=tenants_after,
        changes=tuple(changes),
        policy_changes=dict(policy_changes or {}),
        set_aside_before=left_out[0],
        set_aside_after=left_out[1],
    )
