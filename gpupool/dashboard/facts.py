"""The scheduler's facts behind a verdict, as the workload page shows them: each known key
with a label and its kind, its value in the pages' formats (GPUs and GPU-hours as the number
rule writes them, times in the viewer's zone, yes/no). The one mapping of fact key to label
and kind; the raw facts stay the API's (``explanation.facts``, docs/api.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from enum import Enum

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from gpupool.dashboard.templatetags.dashboard import (
    gpu_hours,
    local_time,
    number_or_dash,
    signed_gpus,
)
from gpupool.dashboard.templatetags.dashboard import in_unit as in_unit  # for the pages
from gpupool.inventory.units import GPU_UNIT as GPU_UNIT  # re-exported for the pages
from gpupool.inventory.units import MIG_UNIT as MIG_UNIT
from gpupool.number_formats import GPU_PLACES, MINUS, NO_VALUE, Number, duration


class Kind(Enum):
    """How a fact's value is written."""

    TEXT = "text"
    COUNT = "count"  # a plain number (pods)
    GPUS = "gpus"  # GPUs: the number rule, with the unit
    GPU_HOURS = "gpu_hours"
    AMOUNT = "amount"  # of the fact ``resource``: GPUs, else CPU cores or GB of memory
    TIME = "time"  # ISO 8601 text or POSIX seconds, shown in the viewer's zone
    SECONDS = "seconds"  # a duration
    YES_NO = "yes_no"
    LIST = "list"
    FACTS = "facts"  # nested facts, written by this same mapping


@dataclass(frozen=True, slots=True)
class Fact:
    """A fact's label for people and the kind of its value."""

    label: str
    kind: Kind = Kind.TEXT


FACTS: dict[str, Fact] = {
    "queue": Fact("queue"),
    "flavor": Fact("flavor"),
    "flavors": Fact("flavors it may use", Kind.LIST),
    "tenant": Fact("team"),
    "priority_class": Fact("priority class"),
    "resource": Fact("what runs short"),
    "asked": Fact("asked", Kind.AMOUNT),
    "free": Fact("free", Kind.AMOUNT),
    "healthy": Fact("healthy in the pool", Kind.AMOUNT),
    "asked_gpus": Fact("GPUs asked", Kind.GPUS),
    "available_gpus": Fact("quota available", Kind.GPUS),
    "free_gpus": Fact("GPUs free", Kind.GPUS),
    "asked_pod_gpus": Fact("GPUs asked per pod", Kind.GPUS),
    "largest_pod_gpus": Fact("most healthy GPUs on one node", Kind.GPUS),
    "lent_gpus": Fact("of its share lent to others", Kind.GPUS),
    "lent_flavor": Fact("of flavor"),  # the flavor lent (its unit: ``scheduler.explain``)
    "lent_to": Fact("lent to", Kind.LIST),
    "borrowers": Fact("queues borrowing it", Kind.COUNT),
    "cannot_reclaim": Fact("why it cannot be taken back now"),
    "reclaimable_at": Fact("may be taken back from", Kind.TIME),
    "borrowing_capped": Fact("borrowing capped by its capability", Kind.YES_NO),
    "never_fits": Fact("never fits as asked", Kind.YES_NO),
    "refused": Fact("refused because"),
    "no_nodes": Fact("no node of a flavor it may use", Kind.YES_NO),
    "any_node": Fact("may run on any node", Kind.YES_NO),
    "pods": Fact("pods", Kind.COUNT),
    "minimum": Fact("pods needed at least", Kind.COUNT),
    "largest_placeable": Fact("most of its pods that fit", Kind.COUNT),
    "gpu_share": Fact("share of one GPU each pod asks", Kind.GPUS),
    "missing_pods": Fact("pods not created yet", Kind.COUNT),
    "pods_being_created": Fact("pods being created", Kind.YES_NO),
    "blocked_by": Fact("behind (strict FIFO)"),
    "held_for": Fact("room held for"),
    "held_because": Fact("held because"),
    "holding_capacity": Fact("holds room for itself", Kind.YES_NO),
    "held_nodes": Fact("nodes held", Kind.LIST),
    "starving_since": Fact("starving since", Kind.TIME),
    "victims": Fact("workloads leaving for it", Kind.LIST),
    "victim_queues": Fact("workloads leaving for it, by queue", Kind.FACTS),
    "remaining_gpu_hours": Fact("budget left", Kind.GPU_HOURS),
    "reservation_gpu_hours": Fact("budget needed to reserve its protected time", Kind.GPU_HOURS),
    "reserved_gpu_hours": Fact("budget reserved by others this cycle", Kind.GPU_HOURS),
    "reserved_by": Fact("reserved by", Kind.LIST),
    "then": Fact("then stopped by"),
    "then_facts": Fact("then", Kind.FACTS),
    "backoff": Fact("backed off", Kind.FACTS),
    "until": Fact("until", Kind.TIME),
    "caused_by": Fact("for preemptions caused by its"),
    "preemptions": Fact("preemptions in the window", Kind.COUNT),
    "window_s": Fact("window", Kind.SECONDS),
    "scaled_guarantee": Fact("guarantee scaled down", Kind.FACTS),
    "guarantee_gpus": Fact("guarantee", Kind.GPUS),
    "scaled_gpus": Fact("scaled to", Kind.GPUS),
    "backed_by": Fact("backed by"),
    "backing_gpus": Fact("backing", Kind.GPUS),
    "guaranteed_gpus": Fact("guaranteed", Kind.GPUS),
    "estimate_not_before": Fact("starts not before", Kind.TIME),
    "estimate_learned": Fact("estimate from similar finished work", Kind.YES_NO),
    "expected_runtime_s": Fact("expected runtime", Kind.SECONDS),
    "expected_runtime_learned": Fact("runtime learned from similar finished work", Kind.YES_NO),
}

# The unit a flavor's capacity, quotas and use count in: ``inventory.units`` (GPU_UNIT,
# MIG_UNIT, flavor_unit), the rule the API shares.
UNITS = (GPU_UNIT, MIG_UNIT)  # the pages' order: whole and shared GPUs first


def signed_in_unit(value: Number | None, unit: str) -> str:
    """A change of an amount with its sign and unit, as ``signed_gpus`` writes GPUs
    (``+2 MIG instances``, a minus sign for less, ``no change``; an en dash for no value)."""
    if unit == GPU_UNIT or value is None or value == 0:
        return signed_gpus(value)
    sign = "+" if value > 0 else MINUS
    return f"{sign}{in_unit(abs(Decimal(str(value))), unit)}"


# The other units of ``asked`` and ``free`` by the fact ``resource`` (GPUs otherwise:
# ``gpu``, and ``quota``, the room left in a queue's quota).
AMOUNT_UNITS = {"cpu": "CPU cores", "memory": "GB of memory"}


@dataclass(frozen=True, slots=True)
class FactRow:
    """One fact as a row: its key (the API's), label and value as written for people."""

    key: str
    label: str
    value: SafeString | str


def moment(value: object) -> datetime | None:
    """A fact's time: ISO 8601 text (naive read as UTC) or POSIX seconds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    return None


def fact_value(
    key: str, value: object, facts: Mapping[str, object], unit: str = GPU_UNIT
) -> SafeString | str:
    """One fact's value in the pages' format, by its kind (``facts``: the others, for the
    unit of an amount; ``unit``: what its GPUs count, a MIG workload's MIG instances); an
    unknown key's value as it is."""
    kind = FACTS[key].kind if key in FACTS else None
    if value is None:
        return NO_VALUE
    if kind is Kind.YES_NO or isinstance(value, bool):
        return "yes" if value else "no"
    if kind is Kind.GPUS:
        return in_unit(value, unit)  # type: ignore[arg-type]
    if kind is Kind.GPU_HOURS:
        return gpu_hours(value)  # type: ignore[arg-type]
    if kind is Kind.AMOUNT:
        other = AMOUNT_UNITS.get(str(facts.get("resource", "")))
        if other is None:
            return in_unit(value, unit)  # type: ignore[arg-type]
        return f"{number_or_dash(value, GPU_PLACES)} {other}"  # type: ignore[arg-type]
    if kind is Kind.COUNT:
        return number_or_dash(value, GPU_PLACES)  # type: ignore[arg-type]
    if kind is Kind.SECONDS and isinstance(value, int | float):
        return duration(value)
    if kind is Kind.TIME:
        when = moment(value)
        return str(value) if when is None else local_time(when)
    if isinstance(value, Mapping):
        rows = fact_rows(value, unit)
        return format_html_join("; ", "{} {}", ((row.label, row.value) for row in rows))
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value) or NO_VALUE
    return str(value)


# Labels that depend on the verdict: a quota verdict of work that never fits gives, as its
# available GPUs, what the capabilities on its path allow at most, not what is free of it now.
NEVER_FITS_LABELS = {"available_gpus": "most the capabilities on its path allow"}


# A label's GPUs, for a workload whose GPUs are MIG instances ("GPUs asked": "MIG instances
# asked"), as its value says them.
_GPU_WORD = re.compile(r"\bGPU(s?)\b")


def fact_label(key: str, facts: Mapping[str, object], unit: str = GPU_UNIT) -> str:
    """How the facts table names ``key`` among ``facts``, its GPUs said in ``unit``."""
    if facts.get("never_fits") and key in NEVER_FITS_LABELS:
        label = NEVER_FITS_LABELS[key]
    else:
        label = FACTS[key].label if key in FACTS else key
    if unit == GPU_UNIT or key not in FACTS:
        return label
    return _GPU_WORD.sub(lambda found: unit + found[1], label)


def fact_rows(facts: Mapping[str, object], unit: str = GPU_UNIT) -> list[FactRow]:
    """The facts as rows for people: known keys first in the mapping's order, then any
    other as it is (its key as its label); GPUs in ``unit``, the workload's (``in_unit``: a
    MIG workload's facts count MIG instances, as its Asks card does)."""
    known = [key for key in FACTS if key in facts]
    others = sorted(key for key in facts if key not in FACTS)
    return [
        FactRow(
            key,
            fact_label(key, facts, unit),
            format_html("{}", fact_value(key, facts[key], facts, unit)),
        )
        for key in [*known, *others]
    ]
