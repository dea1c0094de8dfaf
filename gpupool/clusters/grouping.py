"""Pods that ask for gpupool, grouped into workload requests by the gpupool.io/* contract.

DESIGN section 4: label ``gpupool.io/queue`` names the queue; pods of one gang share label
``gpupool.io/workload`` (a pod without it is a workload of one pod, named after the pod);
annotations carry the rest:

====================================  =====================================================
``gpupool.io/min-member``             gang minimum, a whole number >= 1
``gpupool.io/priority-class``         a priority class name
``gpupool.io/protected-runtime``      seconds (``3600``, ``1.5``) or a Go duration (``2h``,
                                      ``1h30m``, ``90s``, ``500ms``); at most a year
``gpupool.io/expected-runtime``       the same forms, > 0: the submitter's estimate, used for
                                      estimated starts (a learned one is used when absent)
``gpupool.io/topology``               ``domain`` or ``preferred``
``gpupool.io/gpu-milli``              1..1000, the fraction of one GPU on a shared flavor;
                                      only with ``nvidia.com/gpu: 1``
``gpupool.io/last-checkpoint``        RFC 3339 time of the job's latest checkpoint (the
                                      latest over the workload's pods counts)
====================================  =====================================================

A workload's name is scoped by its namespace (``WorkloadKey``). Its pods with identical
requests and identical node constraints form one pod set. Only live pods (not ended, not
being deleted) ask for capacity; the ended and terminating ones are listed apart.

What a pod says is untrusted: a malformed value makes that workload an ``InvalidWorkload``
whose errors name the label or annotation and the value, and never stops the grouping of the
others. Whether the queue and the class exist, and whether the namespace's tenant owns the
queue, needs the database: ``reference_errors`` answers that from what the loop passes in.

A ``min-member`` above the pods that exist is not an error: controllers create a gang's
pods one by one, so the workload waits for the ``missing_pods`` (reason ``gang``), as
Volcano's PodGroup does; only a minimum beyond ``MAX_PODS`` is absurd.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple, TypeVar

from gpupool.clusters.base import MANAGED_BY_LABEL, SCHEDULER_NAME, PodFacts, PodKey
from gpupool.clusters.base import WORKLOAD_LABEL as WORKLOAD_LABEL  # the DESIGN §4 labels' home
from gpupool.clusters.matching import SchedulingConstraints
from gpupool.scheduler.types import MILLI, Topology

QUEUE_LABEL = "gpupool.io/queue"
MIN_MEMBER = "gpupool.io/min-member"
PRIORITY_CLASS = "gpupool.io/priority-class"
PROTECTED_RUNTIME = "gpupool.io/protected-runtime"
EXPECTED_RUNTIME = "gpupool.io/expected-runtime"
TOPOLOGY = "gpupool.io/topology"
GPU_MILLI = "gpupool.io/gpu-milli"
LAST_CHECKPOINT = "gpupool.io/last-checkpoint"

MAX_PODS = 10_000  # pods in one workload
MAX_GPUS_PER_POD = 1024
MAX_DURATION_S = 366 * 24 * 3600.0
MAX_VALUE_LENGTH = 256
CLOCK_SKEW_S = 300.0  # a checkpoint may be this far in the future (clocks differ)
TOPOLOGIES: tuple[Topology, ...] = ("domain", "preferred")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # a Kubernetes object name
_SECONDS = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_GO_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_RFC3339 = re.compile(
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)

Origin = Literal["controller", "gpupool", "bare"]
T = TypeVar("T")


class WorkloadKey(NamedTuple):
    """A workload's identity: the namespace of its pods and its name there."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class AnnotationError(ValueError):
    """A gpupool.io/* value a pod carries that is not what the contract allows."""


def _quoted(value: str) -> str:
    shown = value if len(value) <= 64 else value[:61] + "..."
    return '"' + shown.replace('"', '\\"') + '"'


def _fail(key: str, value: str, why: str) -> AnnotationError:
    return AnnotationError(f"{key}: {_quoted(value)} {why}")


def parse_duration(key: str, value: str) -> float:
    """Seconds from ``3600`` / ``1.5`` or a Go duration such as ``2h`` or ``1h30m``."""
    text = value.strip()
    if _SECONDS.match(text):
        seconds = float(text)
    else:
        parts = _GO_DURATION_PART.findall(text)
        if not text or "".join(n + u for n, u in parts) != text:
            raise _fail(key, value, "is not a duration (seconds, or Go form like 2h or 1h30m)")
        seconds = sum(float(number) * _GO_UNITS[unit] for number, unit in parts)
    if not math.isfinite(seconds) or seconds > MAX_DURATION_S:
        raise _fail(key, value, f"is longer than {MAX_DURATION_S / 86400:.0f} days")
    return seconds


def parse_whole(key: str, value: str, lowest: int, highest: int) -> int:
    """A whole number in [lowest, highest]."""
    text = value.strip()
    if not text.isascii() or not text.isdigit():
        raise _fail(key, value, "is not a whole number")
    number = int(text)
    if not lowest <= number <= highest:
        raise _fail(key, value, f"is outside {lowest}..{highest}")
    return number


def parse_topology(key: str, value: str) -> Topology:
    """``domain`` or ``preferred``."""
    for topology in TOPOLOGIES:
        if value == topology:
            return topology
    raise _fail(key, value, f"is not one of {', '.join(TOPOLOGIES)}")


def parse_time(key: str, value: str) -> float:
    """An RFC 3339 time (with its offset) in POSIX seconds."""
    text = value.strip()
    if not _RFC3339.match(text):
        raise _fail(key, value, "is not an RFC 3339 time like 2026-11-29T10:00:00Z")
    text = text.replace("t", "T").replace("z", "Z")
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError as exc:  # e.g. month 13
        raise _fail(key, value, f"is not a valid time ({exc})") from None


def parse_name(key: str, value: str) -> str:
    """A Kubernetes object name (lowercase letters, digits, '-' and '.')."""
    if not _NAME.match(value):
        raise _fail(key, value, "is not a valid name")
    return value


@dataclass(frozen=True, slots=True)
class PodSetRequest:
    """Identical pods of a workload: what each asks and the nodes it may use."""

    pods: tuple[PodKey, ...]
    constraints: SchedulingConstraints
    gpus: int = 0
    mig_profile: str | None = None  # set when the pods ask nvidia.com/mig-<profile>
    gpu_milli: int | None = None  # set on shared flavors
    cpu_milli: int = 0
    memory_mib: int = 0

    @property
    def count(self) -> int:
        """Pods in the set."""
        return len(self.pods)


@dataclass(frozen=True, slots=True)
class WorkloadRequest:
    """A workload as its pods describe it; names (queue, class) still to be checked."""

    key: WorkloadKey
    queue: str
    pod_sets: tuple[PodSetRequest, ...]
    submitted_at: float
    origin: Origin
    priority_class: str | None = None
    min_member: int | None = None
    topology: Topology | None = None
    protected_runtime_s: float | None = None
    expected_runtime_s: float | None = None
    last_checkpoint_at: float | None = None
    owner: tuple[str, str] | None = None  # the controller's kind and name
    succeeded: tuple[PodKey, ...] = ()
    failed: tuple[PodKey, ...] = ()
    terminating: tuple[PodKey, ...] = ()

    @property
    def live_pods(self) -> int:
        """Pods that still ask for capacity."""
        return sum(pod_set.count for pod_set in self.pod_sets)

    @property
    def missing_pods(self) -> int:
        """Pods the gang minimum still waits for."""
        return max((self.min_member or 0) - self.live_pods, 0)


@dataclass(frozen=True, slots=True)
class InvalidWorkload:
    """A workload whose pods say something malformed: it stays pending, the errors say why."""

    key: WorkloadKey
    pods: tuple[PodKey, ...]
    errors: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Grouping:
    """Pods grouped: the valid workload requests and the invalid ones, each sorted by key."""

    workloads: tuple[WorkloadRequest, ...] = ()
    invalid: tuple[InvalidWorkload, ...] = ()


def workload_key(pod: PodFacts) -> WorkloadKey:
    """The workload a pod belongs to: its ``gpupool.io/workload`` label, else its own name."""
    return WorkloadKey(pod.namespace, pod.labels.get(WORKLOAD_LABEL) or pod.name)


def _live(pod: PodFacts) -> bool:
    return not pod.finished and not pod.deleting


def _origin(pod: PodFacts) -> Origin:
    if pod.labels.get(MANAGED_BY_LABEL) == SCHEDULER_NAME:
        return "gpupool"
    return "controller" if pod.owner_kind else "bare"


def _shared_value(pods: Sequence[PodFacts], key: str, label: bool, errors: list[str]) -> str | None:
    """The one value all pods give for ``key``, or None; disagreement is an error."""
    seen: dict[str | None, str] = {}
    for pod in pods:
        source = pod.labels if label else pod.annotations
        seen.setdefault(source.get(key), pod.name)
    if len(seen) > 1:
        shown = ", ".join(
            f"{'(none)' if value is None else _quoted(value)} on {name}"
            for value, name in sorted(seen.items(), key=lambda item: item[1])
        )
        errors.append(f"the pods disagree on {key}: {shown}")
        return None
    value = next(iter(seen), None)
    if value is not None and len(value) > MAX_VALUE_LENGTH:
        errors.append(f"{key}: the value is longer than {MAX_VALUE_LENGTH} characters")
        return None
    return value


def _parsed(
    errors: list[str], parse: Callable[[str, str], T], key: str, value: str | None
) -> T | None:
    """``parse(key, value)``, or None when absent; a malformed value adds its error."""
    if value is None:
        return None
    try:
        return parse(key, value)
    except AnnotationError as exc:
        errors.append(str(exc))
        return None


def _pod_set_shape(pod: PodFacts, errors: list[str]) -> tuple[int, str | None, int | None] | None:
    """A pod's GPUs, MIG profile and milli-GPU; None (with an error) when malformed."""
    requests = pod.requests
    profiles = sorted(profile for profile, count in requests.mig.items() if count)
    if len(profiles) > 1 or (profiles and requests.gpus):
        asked = [f"nvidia.com/mig-{p}" for p in profiles]
        if requests.gpus:
            asked.insert(0, "nvidia.com/gpu")
        errors.append(f"pod {pod.name} asks for {' and '.join(asked)}: one GPU resource per pod")
        return None
    profile = profiles[0] if profiles else None
    gpus = requests.mig[profile] if profile else requests.gpus
    if gpus > MAX_GPUS_PER_POD:
        errors.append(f"pod {pod.name} asks for {gpus} GPUs, more than {MAX_GPUS_PER_POD}")
        return None
    milli_text = pod.annotations.get(GPU_MILLI)
    milli: int | None = None
    if milli_text is not None:
        try:
            milli = parse_whole(GPU_MILLI, milli_text, 1, MILLI)
        except AnnotationError as exc:
            errors.append(f"pod {pod.name}: {exc}")
            return None
        if gpus != 1 or profile is not None:
            errors.append(
                f"pod {pod.name}: {GPU_MILLI}: {_quoted(milli_text)} needs "
                f"nvidia.com/gpu: 1 (the pod asks for {gpus})"
            )
            return None
    return gpus, profile, milli


def group_workload(
    key: WorkloadKey, pods: Iterable[PodFacts], now: float
) -> WorkloadRequest | InvalidWorkload:
    """One workload from its pods (all with this key), or why it is invalid."""
    members = sorted(pods, key=lambda p: p.name)
    keys = tuple(pod.key for pod in members)
    live = [pod for pod in members if _live(pod)]
    considered = live or members
    errors: list[str] = []
    if len(members) > MAX_PODS:
        too_many = f"the workload has {len(members)} pods (at most {MAX_PODS})"
        return InvalidWorkload(key, keys, (too_many,))

    queue = _shared_value(considered, QUEUE_LABEL, True, errors)
    if queue is None and not errors:
        errors.append(f"label {QUEUE_LABEL} is missing")
    elif queue == "":
        errors.append(f"label {QUEUE_LABEL} is empty")
    values = {
        name: _shared_value(considered, name, False, errors)
        for name in (MIN_MEMBER, PRIORITY_CLASS, PROTECTED_RUNTIME, EXPECTED_RUNTIME, TOPOLOGY)
    }
    min_member = _parsed(
        errors, lambda k, v: parse_whole(k, v, 1, MAX_PODS), MIN_MEMBER, values[MIN_MEMBER]
    )
    priority_class = _parsed(errors, parse_name, PRIORITY_CLASS, values[PRIORITY_CLASS])
    protected = _parsed(errors, parse_duration, PROTECTED_RUNTIME, values[PROTECTED_RUNTIME])
    expected = _parsed(errors, parse_duration, EXPECTED_RUNTIME, values[EXPECTED_RUNTIME])
    if expected == 0.0:
        errors.append(f"{EXPECTED_RUNTIME}: {_quoted(values[EXPECTED_RUNTIME] or '')} is zero")
    topology = _parsed(errors, parse_topology, TOPOLOGY, values[TOPOLOGY])

    checkpoints: list[float] = []
    for pod in members:
        text = pod.annotations.get(LAST_CHECKPOINT)
        if text is None:
            continue
        try:
            moment = parse_time(LAST_CHECKPOINT, text)
        except AnnotationError as exc:
            errors.append(f"pod {pod.name}: {exc}")
            continue
        if moment > now + CLOCK_SKEW_S:
            errors.append(f"pod {pod.name}: {LAST_CHECKPOINT}: {_quoted(text)} is in the future")
        else:
            checkpoints.append(moment)

    sets: dict[PodSetRequest, list[PodKey]] = defaultdict(list)
    for pod in live:
        shape = _pod_set_shape(pod, errors)
        if shape is None:
            continue
        gpus, profile, milli = shape
        template = PodSetRequest(
            pods=(),
            constraints=SchedulingConstraints.of(pod),
            gpus=gpus,
            mig_profile=profile,
            gpu_milli=milli,
            cpu_milli=pod.requests.cpu_milli,
            memory_mib=pod.requests.memory_mib,
        )
        sets[template].append(pod.key)

    if errors:
        return InvalidWorkload(key, keys, tuple(errors))
    pod_sets = [replace(template, pods=tuple(pods)) for template, pods in sets.items()]
    pod_sets.sort(key=lambda s: s.pods[0].name)
    head = considered[0]
    return WorkloadRequest(
        key=key,
        queue=str(queue),
        pod_sets=tuple(pod_sets),
        submitted_at=min(pod.created_at for pod in members),
        origin=_origin(head),
        priority_class=priority_class,
        min_member=min_member,
        topology=topology,
        protected_runtime_s=protected,
        expected_runtime_s=expected,
        last_checkpoint_at=max(checkpoints) if checkpoints else None,
        owner=(head.owner_kind, head.owner_name or "") if head.owner_kind else None,
        succeeded=tuple(p.key for p in members if p.phase == "Succeeded"),
        failed=tuple(p.key for p in members if p.phase == "Failed"),
        terminating=tuple(p.key for p in members if p.deleting and not p.finished),
    )


def group_pods(pods: Iterable[PodFacts], now: float) -> Grouping:
    """All workloads of these pods (ours: other schedulers' pods are left out), sorted by key."""
    by_key: dict[WorkloadKey, list[PodFacts]] = defaultdict(list)
    for pod in pods:
        if pod.scheduler_name == SCHEDULER_NAME:
            by_key[workload_key(pod)].append(pod)
    workloads: list[WorkloadRequest] = []
    invalid: list[InvalidWorkload] = []
    for key in sorted(by_key):
        result = group_workload(key, by_key[key], now)
        if isinstance(result, WorkloadRequest):
            workloads.append(result)
        else:
            invalid.append(result)
    return Grouping(tuple(workloads), tuple(invalid))


def reference_errors(
    workload: WorkloadRequest,
    *,
    leaf_queue_tenants: Mapping[str, str | None],
    namespace_tenants: Mapping[str, str],
    priority_classes: Collection[str],
) -> tuple[str, ...]:
    """What the database says against a workload's names: queue, tenant, priority class.

    ``leaf_queue_tenants`` maps each leaf queue to its tenant, ``namespace_tenants`` each
    owned namespace to its tenant (DESIGN 4: a pod may only name a queue of the tenant that
    owns its namespace).
    """
    errors: list[str] = []
    namespace = workload.key.namespace
    if workload.queue not in leaf_queue_tenants:
        errors.append(f"{QUEUE_LABEL}: {_quoted(workload.queue)} is not a leaf queue")
    else:
        queue_tenant = leaf_queue_tenants[workload.queue]
        owner = namespace_tenants.get(namespace)
        if owner is None:
            errors.append(f"namespace {namespace} belongs to no tenant, so it may use no queue")
        elif owner != queue_tenant:
            errors.append(
                f"{QUEUE_LABEL}: {_quoted(workload.queue)} belongs to tenant {queue_tenant}, "
                f"not to {owner}, which owns namespace {namespace}"
            )
    if workload.priority_class is not None and workload.priority_class not in priority_classes:
        errors.append(
            f"{PRIORITY_CLASS}: {_quoted(workload.priority_class)} is not a priority class"
        )
    return tuple(errors)
