"""The scenario format (docs/scheduler.md, "Scenario files"): read and validate a snapshot,
write a plan.

Reading is strict: an unknown key, a missing required key, a wrong type or a value outside
its range is a ``ScenarioError`` whose message starts with the path of the offending field,
e.g. ``workloads[3].pod_sets[0].gpus: must be >= 0``. Nothing is half-loaded.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar, get_args

from gpupool.scheduler import mig as mig_tables
from gpupool.scheduler.types import (
    DEFAULT_BACKOFF,
    DEFAULT_PHASES,
    DEFAULT_VICTIM_PROTECTION,
    MIB_PER_GB,
    MILLI,
    Admission,
    BackoffPolicy,
    BudgetInfo,
    FlavorInfo,
    MigInfo,
    NodeInfo,
    PendingExplanation,
    Plan,
    PodPlacement,
    PodSetInfo,
    PolicyInfo,
    PreemptionEventInfo,
    PriorityClassInfo,
    QueueInfo,
    Queueing,
    QueueOrder,
    QuotaInfo,
    Snapshot,
    VictimProtectionPolicy,
    VictimSearch,
    WorkloadInfo,
)

T = TypeVar("T")
S = TypeVar("S", bound=str)


class ScenarioError(ValueError):
    """A scenario that cannot be planned; the message names the field."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A loaded scenario: the snapshot, the policy and the cycle's time."""

    snapshot: Snapshot
    policy: PolicyInfo
    now: float


class _Obj:
    """A JSON object being read: typed getters that name the path on error."""

    def __init__(self, value: object, path: str, allowed: set[str]) -> None:
        if not isinstance(value, dict):
            raise ScenarioError(f"{path or '(top)'}: must be an object")
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise ScenarioError(f"{_join(path, unknown[0])}: unknown key")
        self.data: dict[str, object] = value
        self.path = path

    def at(self, key: str) -> str:
        """Path of one of this object's fields."""
        return _join(self.path, key)

    def has(self, key: str) -> bool:
        """Whether the key is present and not null."""
        return self.data.get(key) is not None

    def raw(self, key: str) -> object:
        """The value as is (None when absent)."""
        return self.data.get(key)

    def string(self, key: str, default: str | None = None) -> str:
        """A required (or defaulted) non-empty string."""
        value = self.data.get(key)
        value = default if value is None else value
        if value is None:
            raise ScenarioError(f"{self.at(key)}: required")
        if not isinstance(value, str) or not value:
            raise ScenarioError(f"{self.at(key)}: must be a non-empty string")
        return value

    def opt_string(self, key: str) -> str | None:
        """An optional string."""
        return None if self.data.get(key) is None else self.string(key)

    def number(self, key: str, default: float | None = None, minimum: float = 0.0) -> float:
        """A finite number >= minimum."""
        value = self.data.get(key)
        value = default if value is None else value
        if value is None:
            raise ScenarioError(f"{self.at(key)}: required")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ScenarioError(f"{self.at(key)}: must be a number")
        if not math.isfinite(value):
            raise ScenarioError(f"{self.at(key)}: must be finite")
        if value < minimum:
            raise ScenarioError(f"{self.at(key)}: must be >= {_fmt(minimum)}")
        return float(value)

    def opt_number(self, key: str, minimum: float = 0.0) -> float | None:
        """An optional number >= minimum."""
        return None if self.data.get(key) is None else self.number(key, minimum=minimum)

    def integer(self, key: str, default: int | None = None, minimum: int = 0) -> int:
        """An integer >= minimum."""
        value = self.data.get(key)
        value = default if value is None else value
        if value is None:
            raise ScenarioError(f"{self.at(key)}: required")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(f"{self.at(key)}: must be an integer")
        if value < minimum:
            raise ScenarioError(f"{self.at(key)}: must be >= {minimum}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        """A boolean."""
        value = self.data.get(key)
        value = default if value is None else value
        if not isinstance(value, bool):
            raise ScenarioError(f"{self.at(key)}: must be true or false")
        return value

    def time(self, key: str) -> float:
        """An ISO 8601 time with a zone, as POSIX seconds."""
        return parse_time(self.string(key), self.at(key))

    def items(self, key: str, required: bool = False) -> list[tuple[str, object]]:
        """The elements of a list field with their paths."""
        value = self.data.get(key)
        if value is None:
            if required:
                raise ScenarioError(f"{self.at(key)}: required")
            return []
        if not isinstance(value, list):
            raise ScenarioError(f"{self.at(key)}: must be a list")
        return [(f"{self.at(key)}[{i}]", item) for i, item in enumerate(value)]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def parse_time(text: str, path: str = "time") -> float:
    """Parse an ISO 8601 time that carries a zone (``Z`` or an offset)."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ScenarioError(f"{path}: not an ISO 8601 time: {text!r}") from None
    if moment.tzinfo is None:
        raise ScenarioError(f"{path}: needs a time zone (e.g. a trailing Z)")
    return moment.timestamp()


def format_time(seconds: float) -> str:
    """POSIX seconds as an ISO 8601 UTC time with a trailing Z."""
    text = datetime.fromtimestamp(seconds, tz=UTC).isoformat()
    return text.replace("+00:00", "Z")


def _unique(names: list[tuple[str, str]], what: str) -> None:
    seen: set[str] = set()
    for path, name in names:
        if name in seen:
            raise ScenarioError(f"{path}: duplicate {what} {name!r}")
        seen.add(name)


def _flavors(top: _Obj) -> dict[str, FlavorInfo]:
    flavors: dict[str, FlavorInfo] = {}
    for path, item in top.items("flavors", required=True):
        obj = _Obj(item, path, {"name", "sharing", "gpu_memory_gb", "hourly_price", "mig"})
        name = obj.string("name")
        if name in flavors:
            raise ScenarioError(f"{obj.at('name')}: duplicate flavor {name!r}")
        sharing = obj.string("sharing", "exclusive")
        if sharing not in ("exclusive", "shared"):
            raise ScenarioError(f"{obj.at('sharing')}: must be 'exclusive' or 'shared'")
        mig = None
        if obj.has("mig"):
            mig_obj = _Obj(obj.raw("mig"), obj.at("mig"), {"gpu_model", "profile"})
            model, profile = mig_obj.string("gpu_model"), mig_obj.string("profile")
            if mig_tables.mig_profiles(model) is None:
                raise ScenarioError(f"{mig_obj.at('gpu_model')}: unknown MIG GPU {model!r}")
            if mig_tables.mig_profile(model, profile) is None:
                raise ScenarioError(f"{mig_obj.at('profile')}: unknown MIG profile {profile!r}")
            if sharing != "exclusive":
                raise ScenarioError(f"{obj.at('sharing')}: a MIG flavor is exclusive per slice")
            mig = MigInfo(model, profile)
        flavors[name] = FlavorInfo(
            name=name,
            sharing="shared" if sharing == "shared" else "exclusive",
            gpu_memory_gb=obj.number("gpu_memory_gb", 0.0),
            hourly_price=obj.number("hourly_price", 0.0),
            mig=mig,
        )
    return flavors


def _nodes(top: _Obj, flavors: Mapping[str, FlavorInfo]) -> list[NodeInfo]:
    nodes: list[NodeInfo] = []
    keys = {"name", "flavor", "gpus", "unhealthy_gpus", "cpu", "memory_gb", "domain"}
    keys |= {"cordoned", "physical_gpus", "rack", "zone"}
    for path, item in top.items("nodes"):
        obj = _Obj(item, path, keys)
        name = obj.string("name")
        flavor = obj.string("flavor")
        if flavor not in flavors:
            raise ScenarioError(f"{obj.at('flavor')}: unknown flavor {flavor!r}")
        gpus = obj.integer("gpus")
        unhealthy: set[int] = set()
        for upath, index in obj.items("unhealthy_gpus"):
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < gpus:
                raise ScenarioError(f"{upath}: must be a GPU index in 0..{gpus - 1}")
            if index in unhealthy:
                raise ScenarioError(f"{upath}: GPU {index} listed twice")
            unhealthy.add(index)
        physical = obj.integer("physical_gpus", minimum=1) if obj.has("physical_gpus") else None
        mig = flavors[flavor].mig
        if mig is not None:
            table_row = mig_tables.mig_profile(mig.gpu_model, mig.profile)
            per_card = table_row.max_instances if table_row is not None else 0
            if physical is None:
                raise ScenarioError(f"{obj.at('physical_gpus')}: required on a MIG flavor")
            if gpus > physical * per_card:
                raise ScenarioError(
                    f"{obj.at('gpus')}: {gpus} {mig.profile} slices exceed {physical} "
                    f"{mig.gpu_model} cards ({per_card} per card)"
                )
        for key in ("rack", "zone"):
            obj.opt_string(key)
        nodes.append(
            NodeInfo(
                name=name,
                flavor=flavor,
                gpus=gpus,
                cpu_milli=round(obj.number("cpu", 0.0) * MILLI),
                memory_mib=round(obj.number("memory_gb", 0.0) * MIB_PER_GB),
                domain=obj.string("domain", name),
                unhealthy_gpus=frozenset(unhealthy),
                cordoned=obj.boolean("cordoned", False),
                physical_gpus=physical,
            )
        )
    _unique([(f"nodes[{i}].name", n.name) for i, n in enumerate(nodes)], "node")
    return nodes


def _gpu_milli(value: float) -> int:
    return round(value * MILLI)


def _queues(top: _Obj, flavors: Mapping[str, FlavorInfo], nodes: list[NodeInfo]) -> list[QueueInfo]:
    queues: list[QueueInfo] = []
    paths: dict[str, str] = {}
    keys = {"name", "parent", "tenant", "weight", "reclaimable", "lending_limit"}
    keys |= {"max_protected_runtime_s", "default_protected_runtime_s", "quota"}
    for path, item in top.items("queues", required=True):
        obj = _Obj(item, path, keys)
        name = obj.string("name")
        if name in paths:
            raise ScenarioError(f"{obj.at('name')}: duplicate queue {name!r}")
        paths[name] = path
        quota: dict[str, QuotaInfo] = {}
        if obj.has("quota"):
            quota_obj = _Obj(obj.raw("quota"), obj.at("quota"), set(flavors))
            for flavor in quota_obj.data:
                levels = _Obj(
                    quota_obj.raw(flavor),
                    quota_obj.at(flavor),
                    {"guarantee", "deserved", "capability"},
                )
                guarantee = levels.number("guarantee", 0.0)
                deserved = levels.number("deserved", guarantee)
                capability = levels.number("capability", deserved)
                if guarantee > deserved:
                    raise ScenarioError(f"{levels.at('guarantee')}: must be <= deserved")
                if deserved > capability:
                    raise ScenarioError(f"{levels.at('deserved')}: must be <= capability")
                quota[flavor] = QuotaInfo(
                    _gpu_milli(guarantee), _gpu_milli(deserved), _gpu_milli(capability)
                )
        weight = obj.number("weight", 1.0)
        if weight <= 0:
            raise ScenarioError(f"{obj.at('weight')}: must be > 0")
        lending = obj.opt_number("lending_limit")
        queues.append(
            QueueInfo(
                name=name,
                parent=obj.opt_string("parent"),
                tenant=obj.opt_string("tenant"),
                weight=weight,
                reclaimable=obj.boolean("reclaimable", True),
                lending_limit=None if lending is None else _gpu_milli(lending),
                max_protected_runtime_s=obj.opt_number("max_protected_runtime_s"),
                default_protected_runtime_s=obj.number("default_protected_runtime_s", 0.0),
                quota=quota,
            )
        )
    by_name = {q.name: q for q in queues}
    roots = [q for q in queues if q.parent is None]
    if len(roots) != 1:
        raise ScenarioError(f"queues: need exactly one root (parent null), found {len(roots)}")
    for queue in queues:
        if queue.parent is not None and queue.parent not in by_name:
            raise ScenarioError(f"{paths[queue.name]}.parent: unknown queue {queue.parent!r}")
    for queue in queues:
        seen = {queue.name}
        parent = queue.parent
        while parent is not None:
            if parent in seen:
                raise ScenarioError(f"{paths[queue.name]}.parent: queue cycle through {parent!r}")
            seen.add(parent)
            parent = by_name[parent].parent
    _check_guarantees(queues, by_name, paths, nodes)
    return queues


def _check_guarantees(
    queues: list[QueueInfo],
    by_name: Mapping[str, QueueInfo],
    paths: Mapping[str, str],
    nodes: list[NodeInfo],
) -> None:
    children: dict[str | None, list[QueueInfo]] = defaultdict(list)
    for queue in queues:
        children[queue.parent].append(queue)
    healthy: Counter[str] = Counter()
    for node in nodes:
        healthy[node.flavor] += node.healthy_gpus * MILLI
    for parent_name, kids in children.items():
        parent = by_name[parent_name] if parent_name is not None else None
        flavors = {flavor for kid in kids for flavor in kid.quota}
        for flavor in sorted(flavors):
            total = sum(kid.quota[flavor].guarantee for kid in kids if flavor in kid.quota)
            if parent is not None and flavor in parent.quota:
                if total > parent.quota[flavor].guarantee:
                    raise ScenarioError(
                        f"{paths[kids[-1].name]}.quota.{flavor}.guarantee: children's "
                        f"guarantees ({total / MILLI:g}) exceed {parent.name}'s "
                        f"({parent.quota[flavor].guarantee / MILLI:g})"
                    )
            elif (parent is None or parent.parent is None) and total > healthy[flavor]:
                raise ScenarioError(
                    f"{paths[kids[-1].name]}.quota.{flavor}.guarantee: total guarantees "
                    f"({total / MILLI:g}) exceed the pool's healthy {flavor} GPUs "
                    f"({healthy[flavor] / MILLI:g})"
                )


def _classes(top: _Obj) -> list[PriorityClassInfo]:
    classes: list[PriorityClassInfo] = []
    keys = {"name", "value", "default", "preemption_policy", "budget_rate"}
    for path, item in top.items("priority_classes", required=True):
        obj = _Obj(item, path, keys)
        policy = obj.string("preemption_policy", "PreemptLowerPriority")
        if policy not in ("PreemptLowerPriority", "Never"):
            raise ScenarioError(
                f"{obj.at('preemption_policy')}: must be 'PreemptLowerPriority' or 'Never'"
            )
        classes.append(
            PriorityClassInfo(
                name=obj.string("name"),
                value=obj.integer("value", minimum=-(2**31)),
                default=obj.boolean("default", False),
                preemption_policy="Never" if policy == "Never" else "PreemptLowerPriority",
                budget_rate=obj.number("budget_rate", 0.0),
            )
        )
    _unique(
        [(f"priority_classes[{i}].name", c.name) for i, c in enumerate(classes)], "priority class"
    )
    defaults = [c for c in classes if c.default]
    if len(defaults) != 1:
        raise ScenarioError(f"priority_classes: need exactly one default, found {len(defaults)}")
    if defaults[0].budget_rate != 0:
        raise ScenarioError("priority_classes: the default class must have budget_rate 0")
    return classes


def _budgets(
    top: _Obj, classes: Mapping[str, PriorityClassInfo], tenants: set[str]
) -> list[BudgetInfo]:
    budgets: list[BudgetInfo] = []
    seen: set[tuple[str, str]] = set()
    for path, item in top.items("budgets"):
        obj = _Obj(item, path, {"tenant", "priority_class", "gpu_hours", "used"})
        tenant = obj.string("tenant")
        if tenant not in tenants:
            raise ScenarioError(f"{obj.at('tenant')}: no queue belongs to tenant {tenant!r}")
        klass = obj.string("priority_class")
        if klass not in classes:
            raise ScenarioError(f"{obj.at('priority_class')}: unknown priority class {klass!r}")
        if (tenant, klass) in seen:
            raise ScenarioError(f"{path}: duplicate budget for ({tenant!r}, {klass!r})")
        seen.add((tenant, klass))
        budgets.append(BudgetInfo(tenant, klass, obj.number("gpu_hours"), obj.number("used", 0)))
    return budgets


def _pod_set(obj: _Obj, flavors: Mapping[str, FlavorInfo]) -> PodSetInfo:
    raw = obj.raw("flavor")
    names: list[str]
    if raw is None and obj.integer("gpus", 0) == 0:
        # A CPU-only pod set may name no flavor: it runs on any node with the CPU and memory.
        for key in ("gpu_milli", "gpu_memory_gb"):
            if obj.has(key):
                raise ScenarioError(f"{obj.at(key)}: only with GPUs (and a flavor)")
        names = []
    elif isinstance(raw, list):
        names = []
        for i, name in enumerate(raw):
            if not isinstance(name, str) or not name:
                raise ScenarioError(f"{obj.at('flavor')}[{i}]: must be a non-empty string")
            names.append(name)
        if not names:
            raise ScenarioError(f"{obj.at('flavor')}: must list at least one flavor")
    else:
        names = [obj.string("flavor")]
    for name in names:
        if name not in flavors:
            raise ScenarioError(f"{obj.at('flavor')}: unknown flavor {name!r}")
    gpus = obj.integer("gpus", 0)
    shared = [flavors[name].sharing == "shared" for name in names]
    milli = obj.integer("gpu_milli", MILLI, minimum=1)
    if milli > MILLI:
        raise ScenarioError(f"{obj.at('gpu_milli')}: must be <= {MILLI}")
    if obj.has("gpu_milli") and not all(shared):
        raise ScenarioError(f"{obj.at('gpu_milli')}: only allowed on shared flavors")
    if milli < MILLI and gpus != 1:
        raise ScenarioError(f"{obj.at('gpus')}: a GPU fraction asks exactly 1 GPU")
    if any(shared) and not all(shared):
        raise ScenarioError(f"{obj.at('flavor')}: do not mix shared and exclusive flavors")
    memory_gb = obj.number("gpu_memory_gb", 0.0)
    for name in names:
        if flavors[name].gpu_memory_gb and memory_gb > flavors[name].gpu_memory_gb:
            raise ScenarioError(
                f"{obj.at('gpu_memory_gb')}: {memory_gb:g} exceeds {name}'s "
                f"{flavors[name].gpu_memory_gb:g} GB per GPU"
            )
    if memory_gb and all(shared):
        # Memory slices on a shared GPU are bounded like its compute: fold them into milli.
        per_gpu = min(flavors[name].gpu_memory_gb for name in names)
        if per_gpu > 0:
            milli = max(milli, math.ceil(memory_gb / per_gpu * MILLI))
    return PodSetInfo(
        count=obj.integer("count", minimum=1),
        gpus=gpus,
        flavors=tuple(names),
        cpu_milli=round(obj.number("cpu", 0.0) * MILLI),
        memory_mib=round(obj.number("memory_gb", 0.0) * MIB_PER_GB),
        gpu_milli=milli,
        gpu_memory_gb=memory_gb,
    )


_WORKLOAD_KEYS = {
    "name",
    "queue",
    "priority_class",
    "pod_sets",
    "min_member",
    "topology",
    "protected_runtime_s",
    "expected_runtime_s",
    "submitted_at",
    "started_at",
    "last_checkpoint_at",
    "state",
    "placement",
    "missing_pods",
    "nominated",
    "evicting_for",
    "backfilled_for",
    "submitter",
}


def _workloads(
    top: _Obj,
    flavors: Mapping[str, FlavorInfo],
    queues: list[QueueInfo],
    classes: Mapping[str, PriorityClassInfo],
    nodes: Mapping[str, NodeInfo],
) -> list[WorkloadInfo]:
    parents = {q.parent for q in queues}
    queue_defaults = {q.name: q for q in queues}
    queue_names = {q.name for q in queues}
    workloads: list[WorkloadInfo] = []
    for path, item in top.items("workloads"):
        obj = _Obj(item, path, _WORKLOAD_KEYS)
        name = obj.string("name")
        queue = obj.string("queue")
        if queue not in queue_names:
            raise ScenarioError(f"{obj.at('queue')}: unknown queue {queue!r}")
        if queue in parents:
            raise ScenarioError(f"{obj.at('queue')}: {queue!r} is not a leaf queue")
        klass = obj.string("priority_class", next(c.name for c in classes.values() if c.default))
        if klass not in classes:
            raise ScenarioError(f"{obj.at('priority_class')}: unknown priority class {klass!r}")
        pod_sets = tuple(
            _pod_set(
                _Obj(
                    raw,
                    ppath,
                    {"count", "gpus", "flavor", "cpu", "memory_gb", "gpu_milli", "gpu_memory_gb"},
                ),
                flavors,
            )
            for ppath, raw in obj.items("pod_sets", required=True)
        )
        if not pod_sets:
            raise ScenarioError(f"{obj.at('pod_sets')}: must have at least one pod set")
        total = sum(p.count for p in pod_sets)
        min_member = obj.integer("min_member", minimum=1) if obj.has("min_member") else None
        if min_member is not None and min_member > total:
            raise ScenarioError(f"{obj.at('min_member')}: must be <= the {total} pods")
        topology = obj.opt_string("topology")
        if topology not in (None, "domain", "preferred"):
            raise ScenarioError(f"{obj.at('topology')}: must be null, 'domain' or 'preferred'")
        state = obj.string("state", "pending")
        if state not in ("pending", "running"):
            raise ScenarioError(f"{obj.at('state')}: must be 'pending' or 'running'")
        started = obj.time("started_at") if obj.has("started_at") else None
        submitted = obj.time("submitted_at") if obj.has("submitted_at") else started
        if submitted is None:
            raise ScenarioError(f"{obj.at('submitted_at')}: required")
        placement: tuple[PodPlacement, ...] = ()
        if state == "running":
            if started is None:
                raise ScenarioError(f"{obj.at('started_at')}: required for a running workload")
            if submitted > started:
                raise ScenarioError(f"{obj.at('submitted_at')}: must not be after started_at")
            placement = _placement(obj, pod_sets, min_member or total, flavors, nodes)
            if obj.has("last_checkpoint_at") and obj.time("last_checkpoint_at") < started:
                raise ScenarioError(f"{obj.at('last_checkpoint_at')}: before started_at")
        else:
            for key in (
                "placement",
                "started_at",
                "evicting_for",
                "last_checkpoint_at",
                "backfilled_for",
            ):
                if obj.has(key):
                    raise ScenarioError(f"{obj.at(key)}: only a running workload has one")
        obj.opt_string("submitter")
        workloads.append(
            WorkloadInfo(
                name=name,
                queue=queue,
                priority_class=klass,
                pod_sets=pod_sets,
                submitted_at=submitted,
                state="running" if state == "running" else "pending",
                min_member=min_member,
                topology="domain"
                if topology == "domain"
                else "preferred"
                if topology == "preferred"
                else None,
                protected_runtime_s=obj.number(
                    "protected_runtime_s", queue_defaults[queue].default_protected_runtime_s
                ),
                expected_runtime_s=obj.opt_number("expected_runtime_s"),
                started_at=started,
                last_checkpoint_at=(
                    obj.time("last_checkpoint_at") if obj.has("last_checkpoint_at") else None
                ),
                placement=placement,
                missing_pods=obj.integer("missing_pods", 0),
                nominated=obj.boolean("nominated", False),
                evicting_for=obj.opt_string("evicting_for"),
                backfilled_for=obj.opt_string("backfilled_for"),
            )
        )
    _unique([(f"workloads[{i}].name", w.name) for i, w in enumerate(workloads)], "workload")
    return workloads


def _placement(
    obj: _Obj,
    pod_sets: tuple[PodSetInfo, ...],
    minimum: int,
    flavors: Mapping[str, FlavorInfo],
    nodes: Mapping[str, NodeInfo],
) -> tuple[PodPlacement, ...]:
    entries = obj.items("placement")
    total = sum(p.count for p in pod_sets)
    if not entries:
        raise ScenarioError(f"{obj.at('placement')}: required for a running workload")
    if not minimum <= len(entries) <= total:
        raise ScenarioError(
            f"{obj.at('placement')}: has {len(entries)} pods, needs {minimum}..{total}"
        )
    pods = [pod_set for pod_set in pod_sets for _ in range(pod_set.count)]
    result: list[PodPlacement] = []
    for (path, raw), pod_set in zip(entries, pods, strict=False):
        entry = _Obj(raw, path, {"node", "gpus", "milli"})
        node_name = entry.string("node")
        if node_name not in nodes:
            raise ScenarioError(f"{entry.at('node')}: unknown node {node_name!r}")
        node = nodes[node_name]
        if pod_set.flavors and node.flavor not in pod_set.flavors:
            raise ScenarioError(
                f"{entry.at('node')}: {node_name!r} is {node.flavor!r}, the pod set asks "
                f"{', '.join(pod_set.flavors)}"
            )
        gpus: list[int] = []
        for gpath, index in entry.items("gpus"):
            if isinstance(index, bool) or not isinstance(index, int):
                raise ScenarioError(f"{gpath}: must be a GPU index")
            if not 0 <= index < node.gpus:
                raise ScenarioError(f"{gpath}: {node_name!r} has no GPU {index}")
            if index in gpus:
                raise ScenarioError(f"{gpath}: GPU {index} listed twice")
            gpus.append(index)
        if len(gpus) != pod_set.gpus:
            raise ScenarioError(f"{entry.at('gpus')}: the pod asks {pod_set.gpus} GPUs")
        milli: int | None = None
        if flavors[node.flavor].sharing == "shared":
            milli = entry.integer("milli", pod_set.gpu_milli, minimum=1)
            if milli != pod_set.gpu_milli:
                raise ScenarioError(f"{entry.at('milli')}: the pod asks {pod_set.gpu_milli}")
        elif entry.has("milli"):
            raise ScenarioError(f"{entry.at('milli')}: only on shared flavors")
        result.append(PodPlacement(node_name, tuple(gpus), milli))
    return tuple(result)


def _check_occupancy(
    workloads: list[WorkloadInfo], nodes: Mapping[str, NodeInfo], paths: Mapping[str, str]
) -> None:
    """Running placements must not over-commit a GPU, a node's CPU or its memory."""
    gpu_used: dict[tuple[str, int], int] = defaultdict(int)
    cpu_used: dict[str, int] = defaultdict(int)
    mem_used: dict[str, int] = defaultdict(int)
    for workload in workloads:
        pods = [ps for ps in workload.pod_sets for _ in range(ps.count)]
        for i, (pod, pod_set) in enumerate(zip(workload.placement, pods, strict=False)):
            where = f"{paths[workload.name]}.placement[{i}]"
            node = nodes[pod.node]
            for index in pod.gpus:
                gpu_used[(pod.node, index)] += pod.milli or MILLI
                if gpu_used[(pod.node, index)] > MILLI:
                    raise ScenarioError(f"{where}.gpus: GPU {index} of {pod.node!r} double-booked")
            cpu_used[pod.node] += pod_set.cpu_milli
            mem_used[pod.node] += pod_set.memory_mib
            if cpu_used[pod.node] > node.cpu_milli:
                raise ScenarioError(f"{where}.node: CPU of {pod.node!r} over capacity")
            if mem_used[pod.node] > node.memory_mib:
                raise ScenarioError(f"{where}.node: memory of {pod.node!r} over capacity")


def _history(top: _Obj) -> list[PreemptionEventInfo]:
    events: list[PreemptionEventInfo] = []
    for path, item in top.items("preemption_history"):
        obj = _Obj(item, path, {"at", "victim", "preemptor", "preemptor_tenant"})
        events.append(
            PreemptionEventInfo(
                at=obj.time("at"),
                victim=obj.string("victim"),
                preemptor=obj.opt_string("preemptor"),
                preemptor_tenant=obj.opt_string("preemptor_tenant"),
            )
        )
    return events


def _one_of(obj: _Obj, key: str, options: tuple[S, ...], default: S) -> S:
    """A string that must be one of ``options`` (a policy's named strategy)."""
    value = obj.string(key, default)
    for option in options:
        if value == option:
            return option
    raise ScenarioError(f"{obj.at(key)}: must be {' or '.join(repr(o) for o in options)}")


_POLICY_KEYS = {
    "placement",
    "starvation_limit_s",
    "preemption_backoff",
    "victim_protection",
    "phases",
    "preemption_attempts_per_queue",
    "queueing",
    "queue_order",
    "fair_reclaim",
    "fair_sharing",
    "victim_search",
}


def _policy(top: _Obj) -> PolicyInfo:
    usual = PolicyInfo()
    if not top.has("policy"):
        return usual
    obj = _Obj(top.raw("policy"), "policy", _POLICY_KEYS)
    placement = obj.string("placement", usual.placement)
    if placement not in ("gpupool", "bestfit"):
        raise ScenarioError(f"{obj.at('placement')}: must be 'gpupool' or 'bestfit'")
    backoff: BackoffPolicy | None = DEFAULT_BACKOFF
    if "preemption_backoff" in obj.data:
        raw = obj.raw("preemption_backoff")
        backoff = None
        if raw is not None:
            b = _Obj(
                raw, obj.at("preemption_backoff"), {"max_preemptions", "window_s", "cooldown_s"}
            )
            backoff = BackoffPolicy(
                b.integer("max_preemptions", DEFAULT_BACKOFF.max_preemptions),
                b.number("window_s", DEFAULT_BACKOFF.window_s),
                b.number("cooldown_s", DEFAULT_BACKOFF.cooldown_s),
            )
    protection: VictimProtectionPolicy | None = DEFAULT_VICTIM_PROTECTION
    if "victim_protection" in obj.data:
        raw = obj.raw("victim_protection")
        protection = None
        if raw is not None:
            v = _Obj(raw, obj.at("victim_protection"), {"evictions", "window_s", "protected_s"})
            protection = VictimProtectionPolicy(
                v.integer("evictions", DEFAULT_VICTIM_PROTECTION.evictions, minimum=1),
                v.number("window_s", DEFAULT_VICTIM_PROTECTION.window_s),
                v.number("protected_s", DEFAULT_VICTIM_PROTECTION.protected_s),
            )
    phases = usual.phases
    if obj.has("phases"):
        names: list[str] = []
        for path, item in obj.items("phases"):
            if not isinstance(item, str) or item not in DEFAULT_PHASES:
                raise ScenarioError(f"{path}: must be one of {', '.join(DEFAULT_PHASES)}")
            names.append(item)
        phases = tuple(names)
    # "fair_sharing" is the older switch for both queue_order and fair_reclaim; the two
    # newer keys, when given, override what it says.
    queue_order, fair_reclaim = usual.queue_order, usual.fair_reclaim
    if obj.has("fair_sharing"):
        fair = obj.boolean("fair_sharing", True)
        queue_order, fair_reclaim = ("dominant-share" if fair else "head-rank"), fair
    return PolicyInfo(
        placement=placement,
        starvation_limit_s=obj.opt_number("starvation_limit_s"),
        backoff=backoff,
        victim_protection=protection,
        phases=phases,
        preemption_attempts_per_queue=obj.integer(
            "preemption_attempts_per_queue", usual.preemption_attempts_per_queue, minimum=1
        ),
        queueing=_one_of(obj, "queueing", get_args(Queueing), usual.queueing),
        queue_order=_one_of(obj, "queue_order", get_args(QueueOrder), queue_order),
        fair_reclaim=obj.boolean("fair_reclaim", fair_reclaim),
        victim_search=_one_of(obj, "victim_search", get_args(VictimSearch), usual.victim_search),
    )


def policy_from_dict(data: object) -> PolicyInfo:
    """A scenario's ``policy`` object on its own (what-if proposals use the same keys).

    Absent keys take ``PolicyInfo()``'s defaults; errors name ``policy.<key>``.
    """
    return _policy(_Obj({"policy": data}, "", {"policy"}))


_TOP_KEYS = {
    "now",
    "policy",
    "flavors",
    "nodes",
    "queues",
    "priority_classes",
    "budgets",
    "workloads",
    "preemption_history",
}


def scenario_from_dict(data: object) -> Scenario:
    """Validate a decoded scenario and build its snapshot, policy and time."""
    top = _Obj(data, "", _TOP_KEYS)
    now = top.time("now")
    flavors = _flavors(top)
    nodes = _nodes(top, flavors)
    queues = _queues(top, flavors, nodes)
    classes = {c.name: c for c in _classes(top)}
    tenants = {q.tenant for q in queues if q.tenant is not None}
    budgets = _budgets(top, classes, tenants)
    node_map = {n.name: n for n in nodes}
    workloads = _workloads(top, flavors, queues, classes, node_map)
    paths = {w.name: f"workloads[{i}]" for i, w in enumerate(workloads)}
    _check_occupancy(workloads, node_map, paths)
    names = set(paths)
    for workload in workloads:
        if workload.evicting_for is not None and workload.evicting_for not in names:
            raise ScenarioError(
                f"{paths[workload.name]}.evicting_for: unknown workload {workload.evicting_for!r}"
            )
        if workload.backfilled_for is not None and workload.backfilled_for not in names:
            raise ScenarioError(
                f"{paths[workload.name]}.backfilled_for: unknown workload "
                f"{workload.backfilled_for!r}"
            )
        if workload.started_at is not None and workload.started_at > now:
            raise ScenarioError(f"{paths[workload.name]}.started_at: after now")
        if workload.last_checkpoint_at is not None and workload.last_checkpoint_at > now:
            raise ScenarioError(f"{paths[workload.name]}.last_checkpoint_at: after now")
    snapshot = Snapshot(
        flavors=tuple(flavors.values()),
        nodes=tuple(nodes),
        queues=tuple(queues),
        priority_classes=tuple(classes.values()),
        workloads=tuple(workloads),
        budgets=tuple(budgets),
        preemption_history=tuple(_history(top)),
    )
    return Scenario(snapshot, _policy(top), now)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as error:
        raise ScenarioError(f"(file): not JSON: {error}") from None
    return scenario_from_dict(data)


def _placement_json(pods: tuple[PodPlacement, ...]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for pod in pods:
        entry: dict[str, object] = {"node": pod.node, "gpus": list(pod.gpus)}
        if pod.milli is not None:
            entry["milli"] = pod.milli
        out.append(entry)
    return out


def pending_json(item: PendingExplanation) -> dict[str, object]:
    """One pending explanation in the output format."""
    return {
        "workload": item.workload,
        "reason": item.reason,
        "detail": item.detail,
        "position": item.position,
        "facts": dict(item.facts),
    }


def _admission_json(admission: Admission) -> dict[str, object]:
    out: dict[str, object] = {
        "workload": admission.workload,
        "placement": _placement_json(admission.placement),
    }
    if admission.backfill_for is not None:
        out["backfill_for"] = admission.backfill_for
    return out


def plan_to_dict(plan: Plan) -> dict[str, object]:
    """The plan in the scenario format's output form (docs/scheduler.md), with ``facts``."""
    return {
        "admit": [_admission_json(a) for a in plan.admit],
        "evict": [
            {"workload": e.workload, "reason": e.reason, "for": e.preemptor} for e in plan.evict
        ],
        "pending": [pending_json(p) for p in plan.pending],
    }


def dump_plan(plan: Plan) -> str:
    """The plan as deterministic JSON text."""
    return json.dumps(plan_to_dict(plan), indent=1, sort_keys=False)


# -- writing a scenario: the inverse of scenario_from_dict -----------------------------------


def _number(value: float) -> int | float:
    """A quantity as a scenario file writes it: whole numbers without a fraction."""
    return int(value) if float(value).is_integer() else value


def policy_to_dict(policy: PolicyInfo) -> dict[str, object]:
    """The ``policy`` object that ``policy_from_dict`` reads back as ``policy``, every key
    written out."""
    out: dict[str, object] = {"placement": policy.placement}
    if policy.starvation_limit_s is not None:
        out["starvation_limit_s"] = _number(policy.starvation_limit_s)
    backoff = policy.backoff
    out["preemption_backoff"] = (
        None
        if backoff is None
        else {
            "max_preemptions": backoff.max_preemptions,
            "window_s": _number(backoff.window_s),
            "cooldown_s": _number(backoff.cooldown_s),
        }
    )
    protection = policy.victim_protection
    out["victim_protection"] = (
        None
        if protection is None
        else {
            "evictions": protection.evictions,
            "window_s": _number(protection.window_s),
            "protected_s": _number(protection.protected_s),
        }
    )
    out["phases"] = list(policy.phases)
    out["preemption_attempts_per_queue"] = policy.preemption_attempts_per_queue
    out["queueing"] = policy.queueing
    out["queue_order"] = policy.queue_order
    out["fair_reclaim"] = policy.fair_reclaim
    out["victim_search"] = policy.victim_search
    return out


def _flavor_json(flavor: FlavorInfo) -> dict[str, object]:
    out: dict[str, object] = {
        "name": flavor.name,
        "sharing": flavor.sharing,
        "gpu_memory_gb": _number(flavor.gpu_memory_gb),
        "hourly_price": _number(flavor.hourly_price),
    }
    if flavor.mig is not None:
        out["mig"] = {"gpu_model": flavor.mig.gpu_model, "profile": flavor.mig.profile}
    return out


def _node_json(node: NodeInfo) -> dict[str, object]:
    out: dict[str, object] = {
        "name": node.name,
        "flavor": node.flavor,
        "gpus": node.gpus,
        "unhealthy_gpus": sorted(node.unhealthy_gpus),
        "cpu": _number(node.cpu_milli / MILLI),
        "memory_gb": _number(node.memory_mib / MIB_PER_GB),
        "domain": node.domain,
        "cordoned": node.cordoned,
    }
    if node.physical_gpus is not None:
        out["physical_gpus"] = node.physical_gpus
    return out


def _gpus(milli: int | None) -> int | float | None:
    """Milli-GPU as the GPUs a scenario file states."""
    return None if milli is None else _number(milli / MILLI)


def _queue_json(queue: QueueInfo) -> dict[str, object]:
    quota: dict[str, object] = {
        flavor: {
            "guarantee": _gpus(levels.guarantee),
            "deserved": _gpus(levels.deserved),
            "capability": _gpus(levels.capability),
        }
        for flavor, levels in queue.quota.items()
    }
    return {
        "name": queue.name,
        "parent": queue.parent,
        "tenant": queue.tenant,
        "weight": _number(queue.weight),
        "reclaimable": queue.reclaimable,
        "lending_limit": _gpus(queue.lending_limit),
        "max_protected_runtime_s": (
            None
            if queue.max_protected_runtime_s is None
            else _number(queue.max_protected_runtime_s)
        ),
        "default_protected_runtime_s": _number(queue.default_protected_runtime_s),
        "quota": quota,
    }


def _class_json(klass: PriorityClassInfo) -> dict[str, object]:
    return {
        "name": klass.name,
        "value": klass.value,
        "default": klass.default,
        "preemption_policy": klass.preemption_policy,
        "budget_rate": _number(klass.budget_rate),
    }


def _budget_json(budget: BudgetInfo) -> dict[str, object]:
    return {
        "tenant": budget.tenant,
        "priority_class": budget.priority_class,
        "gpu_hours": _number(budget.gpu_hours),
        "used": _number(budget.used),
    }


def _pod_set_json(pod_set: PodSetInfo) -> dict[str, object]:
    out: dict[str, object] = {"count": pod_set.count, "gpus": pod_set.gpus}
    if len(pod_set.flavors) == 1:
        out["flavor"] = pod_set.flavors[0]
    elif pod_set.flavors:
        out["flavor"] = list(pod_set.flavors)
    if pod_set.gpu_milli != MILLI:
        out["gpu_milli"] = pod_set.gpu_milli
    if pod_set.gpu_memory_gb:
        out["gpu_memory_gb"] = _number(pod_set.gpu_memory_gb)
    if pod_set.cpu_milli:
        out["cpu"] = _number(pod_set.cpu_milli / MILLI)
    if pod_set.memory_mib:
        out["memory_gb"] = _number(pod_set.memory_mib / MIB_PER_GB)
    return out


def _workload_json(workload: WorkloadInfo) -> dict[str, object]:
    out: dict[str, object] = {
        "name": workload.name,
        "queue": workload.queue,
        "priority_class": workload.priority_class,
        "state": workload.state,
        "pod_sets": [_pod_set_json(pod_set) for pod_set in workload.pod_sets],
        "submitted_at": format_time(workload.submitted_at),
        "protected_runtime_s": _number(workload.protected_runtime_s),
    }
    if workload.min_member is not None:
        out["min_member"] = workload.min_member
    if workload.topology is not None:
        out["topology"] = workload.topology
    if workload.expected_runtime_s is not None:
        out["expected_runtime_s"] = _number(workload.expected_runtime_s)
    if workload.started_at is not None:
        out["started_at"] = format_time(workload.started_at)
    if workload.last_checkpoint_at is not None:
        out["last_checkpoint_at"] = format_time(workload.last_checkpoint_at)
    if workload.placement:
        out["placement"] = _placement_json(workload.placement)
    if workload.missing_pods:
        out["missing_pods"] = workload.missing_pods
    if workload.nominated:
        out["nominated"] = True
    if workload.evicting_for is not None:
        out["evicting_for"] = workload.evicting_for
    if workload.backfilled_for is not None:
        out["backfilled_for"] = workload.backfilled_for
    return out


def _event_json(event: PreemptionEventInfo) -> dict[str, object]:
    out: dict[str, object] = {"at": format_time(event.at), "victim": event.victim}
    if event.preemptor is not None:
        out["preemptor"] = event.preemptor
    if event.preemptor_tenant is not None:
        out["preemptor_tenant"] = event.preemptor_tenant
    return out


def snapshot_to_dict(snapshot: Snapshot, policy: PolicyInfo, now: float) -> dict[str, object]:
    """The scenario (DESIGN section 5) that ``scenario_from_dict`` reads back as this
    snapshot, policy and time: the inverse of the reader, with every quantity it converts
    (milli-GPU, milli-CPU, MiB, POSIX seconds) converted back to GPUs, cores, GB and ISO
    times. Times round-trip exactly to the microsecond."""
    return {
        "now": format_time(now),
        "policy": policy_to_dict(policy),
        "flavors": [_flavor_json(flavor) for flavor in snapshot.flavors],
        "nodes": [_node_json(node) for node in snapshot.nodes],
        "queues": [_queue_json(queue) for queue in snapshot.queues],
        "priority_classes": [_class_json(klass) for klass in snapshot.priority_classes],
        "budgets": [_budget_json(budget) for budget in snapshot.budgets],
        "workloads": [_workload_json(workload) for workload in snapshot.workloads],
        "preemption_history": [_event_json(event) for event in snapshot.preemption_history],
    }
