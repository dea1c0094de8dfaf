"""Admin for scheduling cycle records (read-only: the control loop writes them).

A cycle's page reads as an operator asks about it: when it ran (each moment with its clock and
zone, as the pages write moments), how it ended (the error first when it failed), what it
counted, and where its time went (a table of the phases); what it recorded beyond that (the
outcome and the running totals) as labelled lists rather than raw JSON."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from gpupool.audit.admin import ModelAdmin
from gpupool.control.choices import CycleStatus
from gpupool.control.metrics import PHASES
from gpupool.control.models import SchedulingCycle
from gpupool.number_formats import NO_VALUE, duration, plain_number
from gpupool.workloads.queries import zone_name

# The counts of the cycle's own columns, in the order an operator reads them, with their words.
COUNTS = (
    ("nodes", "nodes in the snapshot"),
    ("workloads", "workloads in the snapshot"),
    ("admitted", "admitted"),
    ("evicted", "evicted"),
    ("pending", "pending"),
)


def moment_text(moment: datetime | None) -> SafeString:
    """A moment to the second in the active zone, the zone named after it as the pages name it
    (``2026-12-07 18:19:05 UTC``: ``workloads.queries.zone_name``), kept on one line in the
    list; the dash for none."""
    if moment is None:
        return format_html("{}", NO_VALUE)
    shown = timezone.localtime(moment)
    return format_html(
        '<span style="white-space: nowrap">{} {}</span>',
        f"{shown:%Y-%m-%d %H:%M:%S}",
        zone_name(shown),
    )


def words(key: str) -> str:
    """A recorded key in words: ``pending_by_reason`` -> ``pending by reason``; seconds
    (``apply_wait_s``) without their ``s``, which their value (a duration) says."""
    return key.removesuffix("_s").replace("_", " ")


def labelled(rows: Iterable[tuple[str, SafeString | str | int]]) -> SafeString:
    """Labels and their values as the admin's small two-column table."""
    return format_html(
        "<table><tbody>{}</tbody></table>",
        format_html_join("", '<tr><th scope="row">{}</th><td>{}</td></tr>', rows),
    )


def readable(value: Any) -> SafeString:
    """A recorded JSON value as HTML an operator reads: an object as a table of its keys in
    words and their values (an object of plain values only on one line: a queue's flavor's
    ``allocated 2 · borrowed 0 · lent 0``), a list of plain values joined (of objects, one item
    each), seconds (a key ending ``_s``) as a duration, numbers to the thousandth."""
    if isinstance(value, dict):
        if not value:
            return format_html("{}", NO_VALUE)
        if all(not isinstance(item, dict | list) for item in value.values()) and len(value) <= 4:
            return format_html_join(
                " \u00b7 ",
                "{} {}",
                ((words(str(key)), readable_item(str(key), item)) for key, item in value.items()),
            )
        return labelled(
            (words(str(key)), readable_item(str(key), item)) for key, item in value.items()
        )
    if isinstance(value, list):
        if not value:
            return format_html("{}", NO_VALUE)
        if all(not isinstance(item, dict | list) for item in value):
            return format_html("{}", ", ".join(str(readable(item)) for item in value))
        return format_html(
            "<ol>{}</ol>",
            format_html_join("", "<li>{}</li>", ((readable(item),) for item in value)),
        )
    if isinstance(value, bool):
        return format_html("{}", "yes" if value else "no")
    if isinstance(value, int | float):
        return format_html("{}", plain_number(value, 3))
    if value is None or value == "":
        return format_html("{}", NO_VALUE)
    return format_html("{}", value)


def readable_item(key: str, value: Any) -> SafeString:
    """``readable`` for the value of ``key``: seconds (``..._s``) as a duration."""
    if key.endswith("_s") and isinstance(value, int | float) and not isinstance(value, bool):
        return format_html("{}", duration(value))
    return readable(value)


@admin.register(SchedulingCycle)
class SchedulingCycleAdmin(ModelAdmin):
    """Cycles with their outcome and counts."""

    # The pool's clock first, as the Overview's table of cycles (a simulated cluster runs ahead
    # of the wall clock of started_at: the list read "3:48 p.m." for cycles of the evening).
    list_display = [
        "id",
        "at",
        "wall_clock",
        "took",
        "status",
        "admitted",
        "evicted",
        "pending",
    ]
    list_filter = ["status"]
    # By the pool's clock, as the list's first column: by started_at (the wall clock), a demo
    # at 60x filtered a day of the wall clock that the column dated days later. A cycle that
    # recorded nothing (skipped, or failed before its record) has no pool's clock: it is under
    # "All dates" only (``status`` finds it).
    date_hierarchy = "cluster_at"
    fieldsets = [
        ("When", {"fields": ["at", "wall_clock", "finished", "took"]}),
        ("Outcome", {"fields": ["status", "counts"]}),
        ("Phases", {"fields": ["phases"]}),
        ("What it did beyond its counts", {"fields": ["outcome_shown"]}),
        (
            "Totals since the first cycle (what /metrics reads)",
            {"fields": ["totals_shown"], "classes": ["collapse"]},
        ),
    ]
    readonly_fields = [
        "at",
        "wall_clock",
        "finished",
        "took",
        "status",
        "error_shown",
        "counts",
        "phases",
        "outcome_shown",
        "totals_shown",
    ]

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        """The fieldsets, a failed cycle's error leading them; another cycle's word (a skipped
        one's "another scheduling cycle holds the lock") with its status."""
        fieldsets = [(name, dict(options)) for name, options in super().get_fieldsets(request, obj)]
        if obj is not None and obj.error and obj.status == CycleStatus.FAILED:
            fieldsets.insert(0, ("Error", {"fields": ["error_shown"]}))
        elif obj is not None and obj.error:
            for name, options in fieldsets:
                if name == "Outcome":
                    options["fields"] = ["status", "error_shown", "counts"]
        return fieldsets

    @admin.display(description="at (pool's clock)", ordering="cluster_at")
    def at(self, cycle: SchedulingCycle) -> SafeString:
        """When the cycle read the cluster, on the pool's clock (none: it recorded nothing)."""
        return moment_text(cycle.cluster_at)

    @admin.display(description="started (wall clock)", ordering="started_at")
    def wall_clock(self, cycle: SchedulingCycle) -> SafeString:
        """When the cycle started, on the wall clock of the process that ran it."""
        return moment_text(cycle.started_at)

    @admin.display(description="finished (wall clock)")
    def finished(self, cycle: SchedulingCycle) -> SafeString:
        """When the cycle finished, on the wall clock (none while it runs)."""
        return moment_text(cycle.finished_at)

    @admin.display(description="took")
    def took(self, cycle: SchedulingCycle) -> str:
        """How long the cycle ran, as the Overview writes it (``719 ms``, ``1.9 s``)."""
        return duration(cycle.duration_s())

    @admin.display(description="error")
    def error_shown(self, cycle: SchedulingCycle) -> SafeString:
        """The error, whole (a traceback keeps its lines); a failed cycle's in the admin's
        error box."""
        if not cycle.error:
            return format_html("{}", NO_VALUE)
        if cycle.status != CycleStatus.FAILED:
            return format_html('<span style="white-space: pre-wrap">{}</span>', cycle.error)
        return format_html(
            '<pre class="errornote" style="white-space: pre-wrap">{}</pre>', cycle.error
        )

    @admin.display(description="counts")
    def counts(self, cycle: SchedulingCycle) -> SafeString:
        """The cycle's counts, each with its words; then the loop's own counts of what it did
        (binds, evictions, pods made), where it recorded them."""
        rows: list[tuple[str, SafeString | str | int]] = [
            (label, getattr(cycle, name)) for name, label in COUNTS
        ]
        more = cycle.outcome.get("counts") if isinstance(cycle.outcome, dict) else None
        if isinstance(more, dict):
            rows += [
                (words(str(key)), readable_item(str(key), value))
                for key, value in sorted(more.items())
                if key not in dict(COUNTS)
            ]
        return labelled(rows)

    @admin.display(description="time by phase")
    def phases(self, cycle: SchedulingCycle) -> SafeString:
        """The phases in their order, each with its time (``duration``, as ``took``) and its
        share of the cycle's time (none while it runs)."""
        took = cycle.duration_s()
        rows = []
        for phase in PHASES:
            seconds = float(getattr(cycle, f"{phase}_s"))
            share = NO_VALUE if not took else f"{plain_number(100 * seconds / took, 1)}%"
            rows.append((phase, duration(seconds), share))
        return format_html(
            "<table><thead><tr><th>phase</th><th>time</th><th>share of the cycle "
            "({})</th></tr></thead><tbody>{}</tbody></table>",
            duration(took),
            format_html_join(
                "",
                '<tr><td>{}</td><td style="text-align: right">{}</td>'
                '<td style="text-align: right">{}</td></tr>',
                rows,
            ),
        )

    @admin.display(description="outcome")
    def outcome_shown(self, cycle: SchedulingCycle) -> SafeString:
        """What the cycle recorded beyond its counts (those are under Outcome)."""
        outcome = cycle.outcome if isinstance(cycle.outcome, dict) else {}
        return readable({key: value for key, value in outcome.items() if key != "counts"})

    @admin.display(description="totals")
    def totals_shown(self, cycle: SchedulingCycle) -> SafeString:
        """The counters carried from cycle to cycle."""
        return readable(cycle.totals)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
