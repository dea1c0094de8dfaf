"""``/metrics`` for Prometheus, read from the scheduling cycles' rows.

The cycle runs in a Celery worker (or ``gpupool loop``), ``/metrics`` is served by the web
processes: several processes, possibly on several hosts. Rather than prometheus-client's
multiprocess mode (a shared directory of per-process files, which ties the web and the workers
to one host and loses counters when a worker's files are cleaned), every cycle carries its
counters forward in its own row (``SchedulingCycle.totals``: phase-duration histograms,
preemptions recorded by reason (``with_preemptions``), bind and evict errors, cycles by
outcome) and stores its gauges (``outcome``: pending workloads by reason, GPUs allocated,
borrowed and lent per queue, and per flavor the free GPUs, their fragmented part and the
largest gang that fits). A scrape reads two rows, whichever process serves it, and the
counters survive restarts. A custom collector turns them into metric families (the exporter
pattern of prometheus-client).

Metric names follow Prometheus' conventions: the ``gpupool_`` prefix, base units
(``_seconds``), ``_total`` for counters.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from django.db.models import Count, Max
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gpupool.accounting.models import PreemptionEvent
from gpupool.control.choices import CycleStatus
from gpupool.control.models import SchedulingCycle
from gpupool.control.queries import fragmentation_of
from gpupool.inventory.units import GPU_UNIT, flavor_units
from gpupool.scheduler.shares import QueueShare
from gpupool.scheduler.types import MILLI

if TYPE_CHECKING:
    from gpupool.control.loop import CycleResult
    from gpupool.control.record import CycleRecord

PHASES = ("sync", "snapshot", "plan", "record", "apply")
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def carried_totals() -> dict[str, Any]:
    """The counters as the last cycle that carried them left them ({} before the first)."""
    found = (
        SchedulingCycle.objects.exclude(totals={})
        .order_by("-started_at", "-id")
        .values_list("totals", flat=True)
        .first()
    )
    return dict(found or {})


def add_to_totals(
    totals: Mapping[str, Any], result: CycleResult, record: CycleRecord | None
) -> dict[str, Any]:
    """The counters with one more cycle in them (succeeded or failed), and the cycles other
    processes skipped since they were last counted (``with_skipped``)."""
    out: dict[str, Any] = with_skipped(totals)
    phases: dict[str, Any] = {k: dict(v) for k, v in dict(out.get("phase_seconds", {})).items()}
    for phase, seconds in result.timings.items():
        entry = phases.setdefault(phase, {"buckets": [0] * len(BUCKETS), "sum": 0.0, "count": 0})
        buckets = list(entry["buckets"])
        for index, bound in enumerate(BUCKETS):
            if seconds <= bound:
                buckets[index] += 1
        entry["buckets"] = buckets
        entry["sum"] = float(entry["sum"]) + seconds
        entry["count"] = int(entry["count"]) + 1
    out["phase_seconds"] = phases
    cycles = dict(out.get("cycles", {}))
    cycles[result.status] = int(cycles.get(result.status, 0)) + 1
    out["cycles"] = cycles
    if record is not None:  # a cycle that recorded: its preemptions are in the database
        out = with_preemptions(out)
    for counter in ("bind_errors", "evict_errors"):
        out[counter] = int(out.get(counter, 0)) + int(result.counts.get(counter, 0))
    return out


def with_preemptions(totals: Mapping[str, Any]) -> dict[str, Any]:
    """The counters with the preemptions recorded since they last counted them, by reason:
    one per workload preempted (``PreemptionEvent``: an eviction decided, a drain's, work
    lost with its node). An eviction a disruption budget refuses is called off and its
    event deleted (``do_record_apply_outcome``), perhaps only at the next cycle (an apply
    handed on); so a cycle counts the events up to the last id the cycle before it saw
    (``preemptions_due``), once they can no longer be called off, and remembers the
    newest id for the next. A refusal, retried each time, counts in the evict errors only.
    Counters carried from a release that counted decided evictions start from the
    newest event (nothing counted twice)."""
    out = dict(totals)
    newest = PreemptionEvent.objects.aggregate(last=Max("id"))["last"] or 0
    if "preemptions_seen" not in out and out.get("preemptions"):
        out["preemptions_seen"] = out["preemptions_due"] = newest
        return out
    seen, due = int(out.get("preemptions_seen", 0)), int(out.get("preemptions_due", 0))
    if due > seen:
        preemptions = dict(out.get("preemptions", {}))
        for reason, count in (
            PreemptionEvent.objects.filter(pk__gt=seen, pk__lte=due)
            .values_list("reason")
            .annotate(n=Count("id"))
            .values_list("reason", "n")
            .order_by()
        ):
            preemptions[reason] = int(preemptions.get(reason, 0)) + count
        out["preemptions"] = preemptions
        seen = due
    out["preemptions_seen"], out["preemptions_due"] = seen, max(newest, seen)
    return out


def with_skipped(totals: Mapping[str, Any]) -> dict[str, Any]:
    """The counters with the cycles skipped since they last counted skips: a process that
    finds the lock held writes a skipped row and no counters (the cycle running meanwhile
    carries them forward from its own), so the next cycle that runs counts the skipped rows
    after the last one counted (``skipped_seen``, a row id: one indexed look-up a cycle)."""
    out = dict(totals)
    seen = int(out.get("skipped_seen", 0))
    found = SchedulingCycle.objects.filter(pk__gt=seen, status=CycleStatus.SKIPPED).aggregate(
        count=Count("id"), last=Max("id")
    )
    if found["count"]:
        cycles = dict(out.get("cycles", {}))
        cycles[CycleStatus.SKIPPED] = int(cycles.get(CycleStatus.SKIPPED, 0)) + found["count"]
        out["cycles"] = cycles
        out["skipped_seen"] = found["last"]
    return out


def queue_gauges(
    shares: Mapping[str, Mapping[str, QueueShare]],
) -> dict[str, dict[str, dict[str, float]]]:
    """Per queue and flavor, GPUs allocated, borrowed (above its deserved share) and lent (its
    deserved share that others use), as the core's quota tree counts them after the cycle
    (``scheduler.shares``, the figures the API shows too)."""
    return {
        queue: {
            flavor: {
                "allocated": share.allocated / MILLI,
                "borrowed": share.borrowed / MILLI,
                "lent": share.lent / MILLI,
            }
            for flavor, share in sorted(by_flavor.items())
        }
        for queue, by_flavor in sorted(shares.items())
        if by_flavor
    }


class CycleCollector(Collector):
    """Metric families from the last cycles' rows."""

    def collect(self) -> Iterator[Metric]:
        """Read the rows and yield every family (empty ones before the first cycle)."""
        totals = carried_totals()
        last = (
            SchedulingCycle.objects.filter(status=CycleStatus.SUCCEEDED)
            .order_by("-started_at", "-id")
            .values_list("outcome", "finished_at")
            .first()
        )
        outcome: Mapping[str, Any] = last[0] if last else {}
        histogram = HistogramMetricFamily(
            "gpupool_cycle_phase_duration_seconds",
            "Time a scheduling cycle spent in each phase.",
            labels=["phase"],
        )
        for phase, entry in sorted(dict(totals.get("phase_seconds", {})).items()):
            buckets = [
                (str(bound), float(count))
                for bound, count in zip(BUCKETS, entry["buckets"], strict=True)
            ]
            buckets.append(("+Inf", float(entry["count"])))
            histogram.add_metric([phase], buckets, float(entry["sum"]))
        yield histogram
        cycles = CounterMetricFamily(
            "gpupool_cycles", "Scheduling cycles run, by outcome.", labels=["status"]
        )
        for status, count in sorted(dict(totals.get("cycles", {})).items()):
            cycles.add_metric([status], float(count))
        yield cycles
        preemptions = CounterMetricFamily(
            "gpupool_preemptions",
            "Workloads preempted (preemption records), by reason; refused evictions count "
            "in gpupool_evict_errors_total only.",
            labels=["reason"],
        )
        for reason, count in sorted(dict(totals.get("preemptions", {})).items()):
            preemptions.add_metric([reason], float(count))
        yield preemptions
        yield CounterMetricFamily(
            "gpupool_bind_errors",
            "Gangs whose binding failed.",
            value=float(totals.get("bind_errors", 0)),
        )
        yield CounterMetricFamily(
            "gpupool_evict_errors",
            "Pods whose eviction was refused or failed.",
            value=float(totals.get("evict_errors", 0)),
        )
        pending = GaugeMetricFamily(
            "gpupool_pending_workloads",
            "Workloads waiting at the last cycle, by the reason it gave.",
            labels=["reason"],
        )
        for reason, count in sorted(dict(outcome.get("pending_by_reason", {})).items()):
            pending.add_metric([reason], float(count))
        yield pending
        families = {
            kind: GaugeMetricFamily(
                f"gpupool_queue_gpus_{kind}",
                f"GPUs {text} per queue and flavor at the last cycle (a MIG flavor's: "
                "MIG instances).",
                labels=["queue", "flavor"],
            )
            for kind, text in (
                ("allocated", "held by the queue's running work"),
                ("borrowed", "the queue holds above its deserved share"),
                ("lent", "of the queue's idle deserved share that others borrow"),
            )
        }
        for queue, per in sorted(dict(outcome.get("queues", {})).items()):
            for flavor, entry in sorted(per.items()):
                for kind, family in families.items():
                    family.add_metric([queue, flavor], float(entry.get(kind, 0.0)))
        yield from families.values()
        yield from pool_gauges(last_fragmentation_sample())
        if last is not None and last[1] is not None:
            yield GaugeMetricFamily(
                "gpupool_last_cycle_finished_timestamp_seconds",
                "When the last successful scheduling cycle finished (POSIX seconds).",
                value=last[1].timestamp(),
            )


# The pool's shape per flavor as the last sampling cycle saw it (``outcome["fragmentation"]``,
# the figures of the Fragmentation page's trend): key, metric, help.
POOL_GAUGES = (
    (
        "free",
        "gpupool_flavor_free",
        "Free where the scheduler may still place, per flavor as last sampled",
    ),
    (
        "fragmented",
        "gpupool_flavor_fragmented",
        "Of the free, what the usual work cannot use, per flavor as last sampled",
    ),
    (
        "largest_gang",
        "gpupool_flavor_largest_gang",
        "The largest gang that fits in one NVLink domain now, per flavor as last sampled",
    ),
)


def last_fragmentation_sample() -> dict[str, dict[str, float]]:
    """The pool's shape per flavor as the last cycle that sampled it recorded it (a cycle
    samples it about once a minute of the pool's clock, not every cycle: the last succeeded
    cycle alone would make the gauges come and go); {} before the first sample."""
    found = (
        SchedulingCycle.objects.filter(
            status=CycleStatus.SUCCEEDED, outcome__has_key="fragmentation"
        )
        .order_by("-started_at", "-id")
        .only("id", "outcome")
        .first()
    )
    return fragmentation_of(found) if found is not None else {}


def pool_gauges(fragmentation: Mapping[str, Mapping[str, float]]) -> Iterator[Metric]:
    """The pool's free GPUs, their fragmented part and the largest gang that fits, per flavor,
    each with its ``unit`` (``GPU``; a MIG flavor's ``MIG instance``: its figures count MIG
    instances, never added to another flavor's GPUs)."""
    units = flavor_units(fragmentation)
    for key, name, text in POOL_GAUGES:
        family = GaugeMetricFamily(
            name,
            f"{text} (a cycle samples the pool about once a minute; label unit: GPU, or MIG "
            "instance for a MIG flavor).",
            labels=["flavor", "unit"],
        )
        for flavor, figures in sorted(fragmentation.items()):
            unit = units.get(flavor, GPU_UNIT)
            family.add_metric([flavor, unit], float(figures.get(key, 0.0)))
        yield family


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text exposition of the cycles' metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CycleCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
