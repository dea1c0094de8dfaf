"""The scenario format (docs/scheduler.md, "Scenario files"): read and validate a snapshot,
write a plan.

Reading is strict: an unknown key, a missing required key, a wrong type or a value outside
its range is a ``ScenarioError`` whose message starts with the path of the offending field,
e.g. ``workloads[3].pod_sets[0].gpus: must be >= 0``. Nothing is half-loaded. Every size and
number has a bound (the ``MAX_*`` constants below, docs/scheduler.md "Limits and errors"),
checked before anything of that size is built, so no input -- however large, deep or absurd
-- makes the reader crash, hang or exhaust memory: it is refused naming the field.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, TypeVar, get_args

from gpupool.scheduler import mig as mig_tables
from gpupool.scheduler.quota import guarantee_groups
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

S = TypeVar("S", bound=str)

# -- limits: every bound the reader sets, in one place (docs/scheduler.md "Limits and errors") --

MAX_FILE_BYTES = 32 * 1024 * 1024  # a file is read no further (B1's 5,000-node pool: 12 MB)
MAX_JSON_VALUES = 2_000_000  # counted before parsing, as commas and opening brackets
MAX_NAME_LENGTH = 512  # any string: a Kubernetes namespace/name is at most 63 + 1 + 253
MAX_FLAVORS = 256
MAX_NODES = 50_000
MAX_GPUS_PER_NODE = 64  # GPUs (or MIG slices) on one node, and cards behind them
MAX_NODE_CPU = 4_096  # cores on one node, and asked by one pod
MAX_NODE_MEMORY_GB = 65_536  # memory on one node, and asked by one pod
MAX_GPU_MEMORY_GB = 1_024  # memory of one GPU
MAX_HOURLY_PRICE = 1_000_000  # price of one GPU-hour
MAX_QUEUES = 10_000
MAX_QUEUE_DEPTH = 16  # queues from the root to a leaf, both counted
MAX_QUOTA_GPUS = MAX_NODES * MAX_GPUS_PER_NODE  # any quota level or lending limit
MIN_WEIGHT, MAX_WEIGHT = 0.001, 1_000_000
MAX_PRIORITY_CLASSES = 1_000
MAX_PRIORITY_VALUE = 1_000_000_000  # |value|: Kubernetes' limit for user PriorityClasses
MAX_BUDGET_RATE = 1_000
MAX_BUDGETS = 100_000
MAX_BUDGET_GPU_HOURS = 1_000_000_000_000
MAX_WORKLOADS = 100_000
MAX_POD_SETS = 8  # per workload, as Kueue's Workload API allows
MAX_PODS_PER_WORKLOAD = 100_000  # Kubernetes' limit on an indexed Job's completions
MAX_TOTAL_PODS = 1_000_000  # all workloads' pods together
MAX_PREEMPTION_EVENTS = 200_000
MAX_DURATION_S = 10 * 365 * 86_400  # any duration or window: ten years
EARLIEST_TIME, LATEST_TIME = "1970-01-01T00:00:00Z", "2200-01-01T00:00:00Z"
MAX_POLICY_COUNT = 1_000_000  # back-off's preemptions, victim protection's evictions
MAX_PREEMPTION_ATTEMPTS = 1_000  # per queue and cycle
# An integer literal longer than this is read as +-10**20, beyond every bound above, so the
# field holding it is named and refused (Python will not even convert one of 4,300 digits).
_JSON_INT_DIGITS = 20
_HUGE_INT: int = 10**_JSON_INT_DIGITS
_REQUIRED: Final = None  # the default of a field that has none


class ScenarioError(ValueError):
    """A scenario that cannot be planned; the message names the field."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A loaded scenario: the snapshot, the policy and the cycle's time."""

    snapshot: Snapshot
    policy: PolicyInfo
    now: float


def _key_text(key: object) -> str:
    """A key as a path shows it: as is when short and plain, else quoted and cut short."""
    text = str(key)
    if text and len(text) <= 64 and text.isascii() and text.isprintable():
        return text
    return repr(text[:64]) + ("..." if len(text) > 64 else "")


class _Obj:
    """A JSON object being read: typed getters that name the path on error."""

    def __init__(self, value: object, path: str, allowed: set[str]) -> None:
        if not isinstance(value, dict):
            raise ScenarioError(f"{path or '(top)'}: must be an object")
        unknown = sorted((key for key in value if key not in allowed), key=str)
        if unknown:
            raise ScenarioError(f"{_join(path, _key_text(unknown[0]))}: unknown key")
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
        if isinstance(value, str) and 0 < len(value) <= MAX_NAME_LENGTH and value.isascii():
            return value  # the usual case, without building the path
        return _checked_string(value, self.at(key))

    def opt_string(self, key: str) -> str | None:
        """An optional string."""
        return None if self.data.get(key) is None else self.string(key)

    def number(
        self, key: str, default: float | None, *, maximum: float, minimum: float = 0.0
    ) -> float:
        """A finite number within [minimum, maximum] (``default`` when absent, unless it is
        ``_REQUIRED``)."""
        value = self.data.get(key)
        value = default if value is None else value
        if value is None:
            raise ScenarioError(f"{self.at(key)}: required")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ScenarioError(f"{self.at(key)}: must be a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise ScenarioError(f"{self.at(key)}: must be finite")
        if not minimum <= value <= maximum:
            _refuse_range(value, minimum, maximum, self.at(key))
        return float(value)

    def opt_number(self, key: str, *, maximum: float, minimum: float = 0.0) -> float | None:
        """An optional number within [minimum, maximum]."""
        if self.data.get(key) is None:
            return None
        return self.number(key, _REQUIRED, minimum=minimum, maximum=maximum)

    def integer(self, key: str, default: int | None, *, maximum: int, minimum: int = 0) -> int:
        """An integer within [minimum, maximum] (``default`` when absent, unless it is
        ``_REQUIRED``)."""
        value = self.data.get(key)
        value = default if value is None else value
        if value is None:
            raise ScenarioError(f"{self.at(key)}: required")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(f"{self.at(key)}: must be an integer")
        if not minimum <= value <= maximum:
            _refuse_range(value, minimum, maximum, self.at(key))
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

    def duration(self, key: str, default: float | None) -> float:
        """A duration in seconds, within 0..``MAX_DURATION_S``."""
        return self.number(key, default, maximum=MAX_DURATION_S)

    def opt_duration(self, key: str) -> float | None:
        """An optional duration in seconds, within 0..``MAX_DURATION_S``."""
        return self.opt_number(key, maximum=MAX_DURATION_S)

    def items(self, key: str, limit: int, required: bool = False) -> list[tuple[str, object]]:
        """The elements of a list field with their paths (at most ``limit`` of them)."""
        value = self.data.get(key)
        if value is None:
            if required:
                raise ScenarioError(f"{self.at(key)}: required")
            return []
        if not isinstance(value, list):
            raise ScenarioError(f"{self.at(key)}: must be a list")
        if len(value) > limit:
            raise ScenarioError(f"{self.at(key)}: {len(value)} entries, at most {limit}")
        return [(f"{self.at(key)}[{i}]", item) for i, item in enumerate(value)]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _refuse_range(value: int | float, minimum: float, maximum: float, path: str) -> None:
    """Refuse a number outside [minimum, maximum]. Ints are compared exactly, however large:
    an int is never converted to a float before it is known to be in range."""
    if value < minimum:
        raise ScenarioError(f"{path}: must be >= {_fmt(minimum)}")
    raise ScenarioError(f"{path}: must be <= {_fmt(maximum)}")


def _checked_string(value: object, path: str) -> str:
    """A non-empty string of at most ``MAX_NAME_LENGTH`` characters that is valid Unicode."""
    if not isinstance(value, str) or not value:
        raise ScenarioError(f"{path}: must be a non-empty string")
    if len(value) > MAX_NAME_LENGTH:
        raise ScenarioError(f"{path}: longer than {MAX_NAME_LENGTH} characters")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ScenarioError(f"{path}: not valid Unicode text") from None
    return value


def _posix(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


_EARLIEST_S, _LATEST_S = _posix(EARLIEST_TIME), _posix(LATEST_TIME)


def parse_time(text: str, path: str = "time") -> float:
    """Parse an ISO 8601 time that carries a zone (``Z`` or an offset), between
    ``EARLIEST_TIME`` and ``LATEST_TIME``."""
    _checked_string(text, path)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ScenarioError(f"{path}: not an ISO 8601 time: {text!r}") from None
    if moment.tzinfo is None:
        raise ScenarioError(f"{path}: needs a time zone (e.g. a trailing Z)")
    try:
        seconds = moment.timestamp()
    except (OverflowError, ValueError):
        seconds = math.inf
    if not _EARLIEST_S <= seconds <= _LATEST_S:
        raise ScenarioError(f"{path}: must be between {EARLIEST_TIME} and {LATEST_TIME}")
    return seconds


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
    for path, item in top.items("flavors", MAX_FLAVORS, required=True):
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
            gpu_memory_gb=obj.number("gpu_memory_gb", 0.0, maximum=MAX_GPU_MEMORY_GB),
            hourly_price=obj.number("hourly_price", 0.0, maximum=MAX_HOURLY_PRICE),
            mig=mig,
        )
    return flavors


def _gpu_indices(obj: _Obj, key: str, gpus: int, taken: frozenset[int]) -> frozenset[int]:
    """A node's list of GPU indices under ``key``: each in 0..gpus-1, listed once, and none
    of ``taken`` (the indices another of its lists names: a GPU is failed or another
    scheduler's, not both)."""
    indices: set[int] = set()
    for path, index in obj.items(key, gpus):
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < gpus:
            raise ScenarioError(f"{path}: must be a GPU index in 0..{gpus - 1}")
        if index in indices:
            raise ScenarioError(f"{path}: GPU {index} listed twice")
        if index in taken:
            raise ScenarioError(f"{path}: GPU {index} is listed in unhealthy_gpus too")
        indices.add(index)
    return frozenset(indices)


def _nodes(top: _Obj, flavors: Mapping[str, FlavorInfo]) -> list[NodeInfo]:
    nodes: list[NodeInfo] = []
    keys = {"name", "flavor", "gpus", "unhealthy_gpus", "cpu", "memory_gb", "domain"}
    keys |= {"cordoned", "physical_gpus", "rack", "zone", "foreign_gpus"}
    for path, item in top.items("nodes", MAX_NODES):
        obj = _Obj(item, path, keys)
        name = obj.string("name")
        flavor = obj.string("flavor")
        if flavor not in flavors:
            raise ScenarioError(f"{obj.at('flavor')}: unknown flavor {flavor!r}")
        gpus = obj.integer("gpus", _REQUIRED, maximum=MAX_GPUS_PER_NODE)
        unhealthy = _gpu_indices(obj, "unhealthy_gpus", gpus, frozenset())
        foreign = _gpu_indices(obj, "foreign_gpus", gpus, unhealthy)
        physical = (
            obj.integer("physical_gpus", _REQUIRED, minimum=1, maximum=MAX_GPUS_PER_NODE)
            if obj.has("physical_gpus")
            else None
        )
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
                cpu_milli=round(obj.number("cpu", 0.0, maximum=MAX_NODE_CPU) * MILLI),
                memory_mib=round(
                    obj.number("memory_gb", 0.0, maximum=MAX_NODE_MEMORY_GB) * MIB_PER_GB
                ),
                domain=obj.string("domain", name),
                unhealthy_gpus=unhealthy,
                cordoned=obj.boolean("cordoned", False),
                physical_gpus=physical,
                foreign_gpus=foreign,
            )
        )
    _unique([(f"nodes[{i}].name", n.name) for i, n in enumerate(nodes)], "node")
    return nodes


def _gpu_milli(value: float) -> int:
    return round(value * MILLI)


def _queues(top: _Obj, flavors: Mapping[str, FlavorInfo]) -> list[QueueInfo]:
    queues: list[QueueInfo] = []
    paths: dict[str, str] = {}
    keys = {"name", "parent", "tenant", "weight", "reclaimable", "lending_limit"}
    keys |= {"max_protected_runtime_s", "default_protected_runtime_s", "quota"}
    keys |= set(_IDLE_KEYS)
    for path, item in top.items("queues", MAX_QUEUES, required=True):
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
                guarantee = levels.number("guarantee", 0.0, maximum=MAX_QUOTA_GPUS)
                deserved = levels.number("deserved", guarantee, maximum=MAX_QUOTA_GPUS)
                capability = levels.number("capability", deserved, maximum=MAX_QUOTA_GPUS)
                if guarantee > deserved:
                    raise ScenarioError(f"{levels.at('guarantee')}: must be <= deserved")
                if deserved > capability:
                    raise ScenarioError(f"{levels.at('deserved')}: must be <= capability")
                quota[flavor] = QuotaInfo(
                    _gpu_milli(guarantee), _gpu_milli(deserved), _gpu_milli(capability)
                )
        weight = obj.number("weight", 1.0, minimum=MIN_WEIGHT, maximum=MAX_WEIGHT)
        lending = obj.opt_number("lending_limit", maximum=MAX_QUOTA_GPUS)
        idle_alert, idle_reclaim = _idle_policy(obj)
        queues.append(
            QueueInfo(
                name=name,
                parent=obj.opt_string("parent"),
                tenant=obj.opt_string("tenant"),
                weight=weight,
                reclaimable=obj.boolean("reclaimable", True),
                lending_limit=None if lending is None else _gpu_milli(lending),
                max_protected_runtime_s=obj.opt_duration("max_protected_runtime_s"),
                default_protected_runtime_s=obj.duration("default_protected_runtime_s", 0.0),
                quota=quota,
                idle_alert_after_s=idle_alert,
                idle_reclaim_after_s=idle_reclaim,
            )
        )
    by_name = {q.name: q for q in queues}
    roots = [q for q in queues if q.parent is None]
    if len(roots) != 1:
        raise ScenarioError(f"queues: need exactly one root (parent null), found {len(roots)}")
    for queue in queues:
        if queue.parent is not None and queue.parent not in by_name:
            raise ScenarioError(f"{paths[queue.name]}.parent: unknown queue {queue.parent!r}")
    _check_depths(queues, by_name, paths)
    _check_guarantees(queues, by_name, paths)
    return queues


def _check_depths(
    queues: list[QueueInfo], by_name: Mapping[str, QueueInfo], paths: Mapping[str, str]
) -> None:
    """No queue cycles, and no path from the root longer than ``MAX_QUEUE_DEPTH`` queues
    (each queue walked once: depths are remembered)."""
    depth: dict[str, int] = {}
    for queue in queues:
        chain: list[str] = []
        on_chain: set[str] = set()
        name: str | None = queue.name
        while name is not None and name not in depth:
            if name in on_chain:
                raise ScenarioError(f"{paths[queue.name]}.parent: queue cycle through {name!r}")
            chain.append(name)
            on_chain.add(name)
            name = by_name[name].parent
        level = 0 if name is None else depth[name]
        for member in reversed(chain):
            level += 1
            depth[member] = level
        if depth[queue.name] > MAX_QUEUE_DEPTH:
            raise ScenarioError(
                f"{paths[queue.name]}.parent: {depth[queue.name]} queues from the root, "
                f"at most {MAX_QUEUE_DEPTH}"
            )


def _check_guarantees(
    queues: list[QueueInfo], by_name: Mapping[str, QueueInfo], paths: Mapping[str, str]
) -> None:
    """Guarantees under a queue with a quota for the flavor fit in its guarantee.

    (Whether the pool's healthy GPUs back the guarantees is not a question for the reader:
    failed GPUs must never stop planning, and the quota tree scales guarantees down to what
    exists, ``quota.scale_guarantees``. The domain apps refuse such a configuration.)
    """
    flavors = sorted({flavor for queue in queues for flavor in queue.quota})
    for flavor in flavors:
        for holder, names in guarantee_groups(queues, flavor).items():
            if holder is None:
                continue
            total = sum(by_name[name].quota[flavor].guarantee for name in names)
            own = by_name[holder].quota[flavor].guarantee
            if total > own:
                raise ScenarioError(
                    f"{paths[names[-1]]}.quota.{flavor}.guarantee: the guarantees under "
                    f"{holder} ({total / MILLI:g}) exceed its own ({own / MILLI:g})"
                )


_IDLE_KEYS = ("idle_alert_after_s", "idle_reclaim_after_s")


def _idle_policy(obj: _Obj) -> tuple[float | None, float | None]:
    """A class's or queue's idle policy: positive timeouts, the reclaim after the alert."""
    alert, reclaim = (obj.opt_duration(key) for key in _IDLE_KEYS)
    for key, value in zip(_IDLE_KEYS, (alert, reclaim), strict=True):
        if value is not None and value <= 0:
            raise ScenarioError(f"{obj.at(key)}: must be a positive number of seconds")
    if alert is not None and reclaim is not None and reclaim <= alert:
        raise ScenarioError(
            f"{obj.at('idle_reclaim_after_s')}: must be after idle_alert_after_s ({_fmt(alert)})"
        )
    return alert, reclaim


def _classes(top: _Obj) -> list[PriorityClassInfo]:
    classes: list[PriorityClassInfo] = []
    keys = {"name", "value", "default", "preemption_policy", "budget_rate", *_IDLE_KEYS}
    for path, item in top.items("priority_classes", MAX_PRIORITY_CLASSES, required=True):
        obj = _Obj(item, path, keys)
        policy = obj.string("preemption_policy", "PreemptLowerPriority")
        if policy not in ("PreemptLowerPriority", "Never"):
            raise ScenarioError(
                f"{obj.at('preemption_policy')}: must be 'PreemptLowerPriority' or 'Never'"
            )
        idle_alert, idle_reclaim = _idle_policy(obj)
        classes.append(
            PriorityClassInfo(
                name=obj.string("name"),
                value=obj.integer(
                    "value", _REQUIRED, minimum=-MAX_PRIORITY_VALUE, maximum=MAX_PRIORITY_VALUE
                ),
                default=obj.boolean("default", False),
                preemption_policy="Never" if policy == "Never" else "PreemptLowerPriority",
                budget_rate=obj.number("budget_rate", 0.0, maximum=MAX_BUDGET_RATE),
                idle_alert_after_s=idle_alert,
                idle_reclaim_after_s=idle_reclaim,
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
    for path, item in top.items("budgets", MAX_BUDGETS):
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
        budgets.append(
            BudgetInfo(
                tenant,
                klass,
                obj.number("gpu_hours", _REQUIRED, maximum=MAX_BUDGET_GPU_HOURS),
                obj.number("used", 0, maximum=MAX_BUDGET_GPU_HOURS),
            )
        )
    return budgets


def _allowed_nodes(obj: _Obj, nodes: Mapping[str, NodeInfo]) -> frozenset[str] | None:
    """A pod set's ``allowed_nodes``: absent (any node), or a list of known node names."""
    if not obj.has("allowed_nodes"):
        return None
    raw = obj.raw("allowed_nodes")
    if not isinstance(raw, list):
        raise ScenarioError(f"{obj.at('allowed_nodes')}: must be a list of node names")
    if len(raw) > len(nodes):
        raise ScenarioError(f"{obj.at('allowed_nodes')}: more names than the {len(nodes)} nodes")
    for i, name in enumerate(raw):
        if not isinstance(name, str) or name not in nodes:
            raise ScenarioError(f"{obj.at('allowed_nodes')}[{i}]: unknown node {name!r}")
    return frozenset(raw)


_POD_SET_KEYS = {
    "count",
    "gpus",
    "flavor",
    "cpu",
    "memory_gb",
    "gpu_milli",
    "gpu_memory_gb",
    "allowed_nodes",
}


def _pod_set(
    obj: _Obj, flavors: Mapping[str, FlavorInfo], nodes: Mapping[str, NodeInfo]
) -> PodSetInfo:
    raw = obj.raw("flavor")
    names: list[str]
    gpus = obj.integer("gpus", 0, maximum=MAX_GPUS_PER_NODE)
    if raw is None and gpus == 0:
        # A CPU-only pod set may name no flavor: it runs on any node with the CPU and memory.
        for key in ("gpu_milli", "gpu_memory_gb"):
            if obj.has(key):
                raise ScenarioError(f"{obj.at(key)}: only with GPUs (and a flavor)")
        names = []
    elif isinstance(raw, list):
        names = []
        for fpath, name in obj.items("flavor", MAX_FLAVORS):
            names.append(_checked_string(name, fpath))
            if names[-1] in names[:-1]:
                raise ScenarioError(f"{fpath}: flavor {name!r} listed twice")
        if not names:
            raise ScenarioError(f"{obj.at('flavor')}: must list at least one flavor")
    else:
        names = [obj.string("flavor")]
    for name in names:
        if name not in flavors:
            raise ScenarioError(f"{obj.at('flavor')}: unknown flavor {name!r}")
    shared = [flavors[name].sharing == "shared" for name in names]
    milli = obj.integer("gpu_milli", MILLI, minimum=1, maximum=MILLI)
    if obj.has("gpu_milli") and not all(shared):
        raise ScenarioError(f"{obj.at('gpu_milli')}: only allowed on shared flavors")
    if milli < MILLI and gpus != 1:
        raise ScenarioError(f"{obj.at('gpus')}: a GPU fraction asks exactly 1 GPU")
    if any(shared) and not all(shared):
        raise ScenarioError(f"{obj.at('flavor')}: do not mix shared and exclusive flavors")
    memory_gb = obj.number("gpu_memory_gb", 0.0, maximum=MAX_GPU_MEMORY_GB)
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
        count=obj.integer("count", _REQUIRED, minimum=1, maximum=MAX_PODS_PER_WORKLOAD),
        gpus=gpus,
        flavors=tuple(names),
        cpu_milli=round(obj.number("cpu", 0.0, maximum=MAX_NODE_CPU) * MILLI),
        memory_mib=round(obj.number("memory_gb", 0.0, maximum=MAX_NODE_MEMORY_GB) * MIB_PER_GB),
        gpu_milli=milli,
        gpu_memory_gb=memory_gb,
        allowed_nodes=_allowed_nodes(obj, nodes),
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
    "idle_since",
    "leaving",
    "window_reserved",
    "eviction_refused_until",
    "submitter",
}


@dataclass(frozen=True, slots=True)
class _WorkloadContext:
    """What a workload is read against: the scenario's flavors, queues, classes and nodes."""

    flavors: Mapping[str, FlavorInfo]
    queues: Mapping[str, QueueInfo]
    inner_queues: frozenset[str]
    classes: Mapping[str, PriorityClassInfo]
    default_class: str
    nodes: Mapping[str, NodeInfo]


def _workload_context(
    flavors: Mapping[str, FlavorInfo],
    queues: list[QueueInfo] | tuple[QueueInfo, ...],
    classes: Mapping[str, PriorityClassInfo],
    nodes: Mapping[str, NodeInfo],
) -> _WorkloadContext:
    return _WorkloadContext(
        flavors=flavors,
        queues={q.name: q for q in queues},
        inner_queues=frozenset(q.parent for q in queues if q.parent is not None),
        classes=classes,
        default_class=next(c.name for c in classes.values() if c.default),
        nodes=nodes,
    )


def _workloads(top: _Obj, context: _WorkloadContext) -> list[WorkloadInfo]:
    workloads: list[WorkloadInfo] = []
    pods = 0
    for path, item in top.items("workloads", MAX_WORKLOADS):
        workload = _workload(_Obj(item, path, _WORKLOAD_KEYS), context)
        pods += sum(p.count for p in workload.pod_sets)
        if pods > MAX_TOTAL_PODS:
            raise ScenarioError(
                f"{path}.pod_sets: the workloads up to this one ask {pods} pods, "
                f"at most {MAX_TOTAL_PODS} in all"
            )
        workloads.append(workload)
    _unique([(f"workloads[{i}].name", w.name) for i, w in enumerate(workloads)], "workload")
    return workloads


def _workload(obj: _Obj, context: _WorkloadContext) -> WorkloadInfo:
    """One workload object (its pods' total bounded before any per-pod list is built)."""
    name = obj.string("name")
    queue = obj.string("queue")
    if queue not in context.queues:
        raise ScenarioError(f"{obj.at('queue')}: unknown queue {queue!r}")
    if queue in context.inner_queues:
        raise ScenarioError(f"{obj.at('queue')}: {queue!r} is not a leaf queue")
    klass = obj.string("priority_class", context.default_class)
    if klass not in context.classes:
        raise ScenarioError(f"{obj.at('priority_class')}: unknown priority class {klass!r}")
    pod_sets = tuple(
        _pod_set(_Obj(raw, ppath, _POD_SET_KEYS), context.flavors, context.nodes)
        for ppath, raw in obj.items("pod_sets", MAX_POD_SETS, required=True)
    )
    if not pod_sets:
        raise ScenarioError(f"{obj.at('pod_sets')}: must have at least one pod set")
    total = sum(p.count for p in pod_sets)
    if total > MAX_PODS_PER_WORKLOAD:
        raise ScenarioError(
            f"{obj.at('pod_sets')}: {total} pods, at most {MAX_PODS_PER_WORKLOAD} a workload"
        )
    min_member = (
        obj.integer("min_member", _REQUIRED, minimum=1, maximum=MAX_PODS_PER_WORKLOAD)
        if obj.has("min_member")
        else None
    )
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
        placement = _placement(obj, pod_sets, min_member or total, context)
        if obj.has("last_checkpoint_at") and obj.time("last_checkpoint_at") < started:
            raise ScenarioError(f"{obj.at('last_checkpoint_at')}: before started_at")
        if obj.has("idle_since") and obj.time("idle_since") < started:
            raise ScenarioError(f"{obj.at('idle_since')}: before started_at")
        if obj.has("window_reserved") and context.classes[klass].budget_rate == 0:
            raise ScenarioError(
                f"{obj.at('window_reserved')}: {klass!r} costs no budget, so there is "
                "no window to reserve"
            )
    else:
        for key in (
            "placement",
            "started_at",
            "evicting_for",
            "last_checkpoint_at",
            "backfilled_for",
            "idle_since",
            "leaving",
            "window_reserved",
            "eviction_refused_until",
        ):
            if obj.has(key):
                raise ScenarioError(f"{obj.at(key)}: only a running workload has one")
    obj.opt_string("submitter")
    return WorkloadInfo(
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
        protected_runtime_s=obj.duration(
            "protected_runtime_s", context.queues[queue].default_protected_runtime_s
        ),
        expected_runtime_s=obj.opt_duration("expected_runtime_s"),
        started_at=started,
        last_checkpoint_at=(
            obj.time("last_checkpoint_at") if obj.has("last_checkpoint_at") else None
        ),
        placement=placement,
        missing_pods=obj.integer("missing_pods", 0, maximum=MAX_PODS_PER_WORKLOAD),
        nominated=obj.boolean("nominated", False),
        evicting_for=obj.opt_string("evicting_for"),
        backfilled_for=obj.opt_string("backfilled_for"),
        idle_since=obj.time("idle_since") if obj.has("idle_since") else None,
        leaving=obj.boolean("leaving", False),
        window_reserved=(
            obj.boolean("window_reserved", False) if obj.has("window_reserved") else None
        ),
        eviction_refused_until=(
            obj.time("eviction_refused_until") if obj.has("eviction_refused_until") else None
        ),
    )


def _placement(
    obj: _Obj,
    pod_sets: tuple[PodSetInfo, ...],
    minimum: int,
    context: _WorkloadContext,
) -> tuple[PodPlacement, ...]:
    total = sum(p.count for p in pod_sets)
    entries = obj.items("placement", total)
    if not entries:
        raise ScenarioError(f"{obj.at('placement')}: required for a running workload")
    if len(entries) < minimum:
        raise ScenarioError(
            f"{obj.at('placement')}: has {len(entries)} pods, needs {minimum}..{total}"
        )
    pods = [pod_set for pod_set in pod_sets for _ in range(pod_set.count)]
    result: list[PodPlacement] = []
    for (path, raw), pod_set in zip(entries, pods, strict=False):
        entry = _Obj(raw, path, {"node", "gpus", "milli"})
        node_name = entry.string("node")
        if node_name not in context.nodes:
            raise ScenarioError(f"{entry.at('node')}: unknown node {node_name!r}")
        node = context.nodes[node_name]
        if pod_set.flavors and node.flavor not in pod_set.flavors:
            raise ScenarioError(
                f"{entry.at('node')}: {node_name!r} is {node.flavor!r}, the pod set asks "
                f"{', '.join(pod_set.flavors)}"
            )
        gpus: list[int] = []
        for gpath, index in entry.items("gpus", node.gpus):
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
        if context.flavors[node.flavor].sharing == "shared":
            milli = entry.integer("milli", pod_set.gpu_milli, minimum=1, maximum=MILLI)
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
    gpu_used: dict[tuple[str, int], int] = {}
    cpu_used: dict[str, int] = {}
    mem_used: dict[str, int] = {}
    for workload in workloads:
        if not workload.placement:
            continue
        pods = [ps for ps in workload.pod_sets for _ in range(ps.count)]
        for i, (pod, pod_set) in enumerate(zip(workload.placement, pods, strict=False)):
            where = f"{paths[workload.name]}.placement[{i}]"
            node = nodes[pod.node]
            for index in pod.gpus:
                if index in node.foreign_gpus:
                    raise ScenarioError(
                        f"{where}.gpus: GPU {index} of {pod.node!r} is another scheduler's"
                        " (foreign_gpus)"
                    )
                used = gpu_used.get((pod.node, index), 0) + (pod.milli or MILLI)
                gpu_used[(pod.node, index)] = used
                if used > MILLI:
                    raise ScenarioError(f"{where}.gpus: GPU {index} of {pod.node!r} double-booked")
            cpu_used[pod.node] = cpu_used.get(pod.node, 0) + pod_set.cpu_milli
            mem_used[pod.node] = mem_used.get(pod.node, 0) + pod_set.memory_mib
            if cpu_used[pod.node] > node.cpu_milli:
                raise ScenarioError(f"{where}.node: CPU of {pod.node!r} over capacity")
            if mem_used[pod.node] > node.memory_mib:
                raise ScenarioError(f"{where}.node: memory of {pod.node!r} over capacity")


def _history(top: _Obj) -> list[PreemptionEventInfo]:
    events: list[PreemptionEventInfo] = []
    for path, item in top.items("preemption_history", MAX_PREEMPTION_EVENTS):
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
                b.integer(
                    "max_preemptions", DEFAULT_BACKOFF.max_preemptions, maximum=MAX_POLICY_COUNT
                ),
                b.duration("window_s", DEFAULT_BACKOFF.window_s),
                b.duration("cooldown_s", DEFAULT_BACKOFF.cooldown_s),
            )
    protection: VictimProtectionPolicy | None = DEFAULT_VICTIM_PROTECTION
    if "victim_protection" in obj.data:
        raw = obj.raw("victim_protection")
        protection = None
        if raw is not None:
            v = _Obj(raw, obj.at("victim_protection"), {"evictions", "window_s", "protected_s"})
            protection = VictimProtectionPolicy(
                v.integer(
                    "evictions",
                    DEFAULT_VICTIM_PROTECTION.evictions,
                    minimum=1,
                    maximum=MAX_POLICY_COUNT,
                ),
                v.duration("window_s", DEFAULT_VICTIM_PROTECTION.window_s),
                v.duration("protected_s", DEFAULT_VICTIM_PROTECTION.protected_s),
            )
    phases = usual.phases
    if obj.has("phases"):
        names: list[str] = []
        for path, item in obj.items("phases", len(DEFAULT_PHASES)):
            if not isinstance(item, str) or item not in DEFAULT_PHASES:
                raise ScenarioError(f"{path}: must be one of {', '.join(DEFAULT_PHASES)}")
            if item in names:
                raise ScenarioError(f"{path}: {item!r} listed twice")
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
        starvation_limit_s=obj.opt_duration("starvation_limit_s"),
        backoff=backoff,
        victim_protection=protection,
        phases=phases,
        preemption_attempts_per_queue=obj.integer(
            "preemption_attempts_per_queue",
            usual.preemption_attempts_per_queue,
            minimum=1,
            maximum=MAX_PREEMPTION_ATTEMPTS,
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
    queues = _queues(top, flavors)
    classes = {c.name: c for c in _classes(top)}
    tenants = {q.tenant for q in queues if q.tenant is not None}
    budgets = _budgets(top, classes, tenants)
    node_map = {n.name: n for n in nodes}
    workloads = _workloads(top, _workload_context(flavors, queues, classes, node_map))
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
        if workload.idle_since is not None and workload.idle_since > now:
            raise ScenarioError(f"{paths[workload.name]}.idle_since: after now")
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


def hypothetical_workload_from_dict(data: object, scenario: Scenario) -> WorkloadInfo:
    """Validate one pending workload object against a loaded scenario (a dry-run's probe).

    Errors name the object's own paths (``pod_sets[0].count: ...``). Whatever its ``state``
    says, it is read as pending; its name must not be one of the scenario's workloads.
    """
    snapshot = scenario.snapshot
    context = _workload_context(
        {f.name: f for f in snapshot.flavors},
        snapshot.queues,
        {c.name: c for c in snapshot.priority_classes},
        {n.name: n for n in snapshot.nodes},
    )
    if isinstance(data, dict):
        data = {**data, "state": "pending"}
    workload = _workload(_Obj(data, "", _WORKLOAD_KEYS), context)
    if any(w.name == workload.name for w in snapshot.workloads):
        raise ScenarioError(f"name: duplicate workload {workload.name!r} (one of the scenario's)")
    return workload


def _json_int(text: str) -> int:
    """An integer literal, or +-``_HUGE_INT`` for one too long to be within any bound."""
    if len(text) > _JSON_INT_DIGITS:
        return -_HUGE_INT if text.startswith("-") else _HUGE_INT
    return int(text)


def read_json_file(path: str | Path) -> object:
    """A JSON file's value, read within the limits: at most ``MAX_FILE_BYTES`` read, at most
    ``MAX_JSON_VALUES`` values (counted before parsing), UTF-8, not nested deeper than the
    parser's recursion allows. Errors start with ``(file)``."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise ScenarioError(f"(file): larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
            # A file is read in one piece of its size; what has no size (a pipe) or grows
            # while it is read is read on, up to the bound.
            data = handle.read(size + 1) if size else b""
            if not size or len(data) > size:
                data += handle.read(MAX_FILE_BYTES + 1 - len(data))
    except OSError as error:
        raise ScenarioError(f"(file): cannot be read: {error.strerror or error}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError(f"(file): larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
    values = data.count(b",") + data.count(b"[") + data.count(b"{")
    if values > MAX_JSON_VALUES:
        raise ScenarioError(f"(file): more than {MAX_JSON_VALUES} JSON values")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ScenarioError(f"(file): not UTF-8 text (byte {error.start})") from None
    del data
    try:
        return json.loads(text, parse_int=_json_int)
    except json.JSONDecodeError as error:
        raise ScenarioError(f"(file): not JSON: {error}") from None
    except RecursionError:
        raise ScenarioError("(file): JSON nested too deeply") from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    return scenario_from_dict(read_json_file(path))


def load_hypothetical_workload(path: str | Path, scenario: Scenario) -> WorkloadInfo:
    """Read and validate a dry-run's workload file against a loaded scenario."""
    return hypothetical_workload_from_dict(read_json_file(path), scenario)


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
    if admission.budget_reservation:
        out["budget_reservation_gpu_hours"] = round(admission.budget_reservation, 3)
    return out


def plan_to_dict(plan: Plan) -> dict[str, object]:
    """The plan in the scenario format's output form (docs/scheduler.md), with ``facts``;
    ``idle_alerts`` only when some running work is idle past its alert timeout, ``grow``
    only when some running elastic gang adds pods (each entry its added pods only)."""
    out: dict[str, object] = {
        "admit": [_admission_json(a) for a in plan.admit],
        "evict": [
            {"workload": e.workload, "reason": e.reason, "for": e.preemptor} for e in plan.evict
        ],
        "pending": [pending_json(p) for p in plan.pending],
    }
    if plan.idle_alerts:
        out["idle_alerts"] = [
            {
                "workload": alert.workload,
                "idle_since": format_time(alert.idle_since),
                "reclaim_at": None if alert.reclaim_at is None else format_time(alert.reclaim_at),
            }
            for alert in plan.idle_alerts
        ]
    if plan.grow:
        out["grow"] = [
            {"workload": growth.workload, "placement": _placement_json(growth.placement)}
            for growth in plan.grow
        ]
    return out


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
    if node.foreign_gpus:
        out["foreign_gpus"] = sorted(node.foreign_gpus)
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
        **_idle_json(queue.idle_alert_after_s, queue.idle_reclaim_after_s),
    }


def _idle_json(alert: float | None, reclaim: float | None) -> dict[str, object]:
    """An idle policy's timeouts that are set (a scenario leaves the others out)."""
    out: dict[str, object] = {}
    if alert is not None:
        out["idle_alert_after_s"] = _number(alert)
    if reclaim is not None:
        out["idle_reclaim_after_s"] = _number(reclaim)
    return out


def _class_json(klass: PriorityClassInfo) -> dict[str, object]:
    return {
        "name": klass.name,
        "value": klass.value,
        "default": klass.default,
        "preemption_policy": klass.preemption_policy,
        "budget_rate": _number(klass.budget_rate),
        **_idle_json(klass.idle_alert_after_s, klass.idle_reclaim_after_s),
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
    if pod_set.allowed_nodes is not None:
        out["allowed_nodes"] = sorted(pod_set.allowed_nodes)
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
    if workload.idle_since is not None:
        out["idle_since"] = format_time(workload.idle_since)
    if workload.leaving:
        out["leaving"] = True
    if workload.window_reserved is not None:
        out["window_reserved"] = workload.window_reserved
    if workload.eviction_refused_until is not None:
        out["eviction_refused_until"] = format_time(workload.eviction_refused_until)
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
