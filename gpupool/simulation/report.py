"""How simulation runs are shown: summary tables and self-contained HTML reports.

- **Tables** are built from a run's JSON document (what ``simulate ... --json`` prints), so the
  command line, the HTML reports and the benchmark scripts (``benchmarks/``), which read saved
  JSON, show the same rows: B2's per policy (`placement_table`), B3's per policy
  (`queueing_policy_table`) and per tenant (`queueing_tenant_table`). A `Table` renders as
  HTML, markdown or a terminal table.
- **Reports** are one HTML page each, plotly.js inlined: B2's allocation and fragmentation
  curves per trace (`write_placement_report`), B3's tables and wait figures
  (`write_queueing_report`). Their figures come from `gpupool.dashboard.charts`; this module
  only picks the numbers out of a run.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import plotly.io
from rich.table import Table as RichTable

from gpupool.dashboard.charts import (
    Figure,
    load_curves_figure,
    shared_vs_alone_figure,
    wait_boxes_figure,
)
from gpupool.scheduler.types import SECONDS_PER_HOUR

if TYPE_CHECKING:
    from gpupool.simulation.placement.experiment import TraceRun
    from gpupool.simulation.queueing.philly import PhillyRun


@dataclass(frozen=True, slots=True)
class Table:
    """A titled table of text cells; the first column names each row."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def percent(fraction: float | None) -> str:
    """A fraction as a percentage with two decimals; blank when absent."""
    return "" if fraction is None else f"{fraction:.2%}"


def hours(seconds: float | None) -> str:
    """Seconds as hours with two decimals; "-" when absent."""
    return "-" if seconds is None else f"{seconds / SECONDS_PER_HOUR:,.2f}"


def describe_ratio(value: float | None) -> str:
    """A ratio for a table cell: two decimals, or "-" when it was not measured."""
    return "-" if value is None else f"{value:.2f}"


def describe_worse_than_alone(tenants: Sequence[str] | None) -> str:
    """The sharing-incentive verdict for a table cell: the tenants, "none", or "not run"."""
    if tenants is None:
        return "not run"
    return ", ".join(tenants) or "none"


# -- tables -----------------------------------------------------------------------------------


def placement_table(document: dict[str, Any]) -> Table:
    """B2, one trace: per policy the allocation ratio at 100% and 130% arrived load, the
    fragmentation rate at 100%, and the FGD paper's allocation at 130% where it has one."""
    paper = document.get("paper", {})
    rows = []
    for name, entry in document["policies"].items():
        allocation = entry["allocation_ratio"]
        theirs = paper.get(name, {}).get("allocation_ratio", {}).get("1.3")
        rows.append(
            (
                name,
                percent(allocation["1.0"]),
                percent(allocation["1.3"]),
                percent(entry["fragmentation_rate"]["1.0"]),
                percent(theirs),
            )
        )
    return Table(
        title=f"openb {document['trace']} (seed {document['seed']})",
        header=("policy", "alloc @100%", "alloc @130%", "frag rate @100%", "paper @130%"),
        rows=tuple(rows),
    )


def queueing_policy_table(document: dict[str, Any]) -> Table:
    """B3, per policy: JCT and wait (mean, p99), utilisation, preemptions, GPU-hours lost
    (and their share of those delivered), share deviation, the tenants that wait longer than
    alone on their deserved share, and the worst tenant's mean JCT shared / alone."""
    rows = []
    for name, m in document["policies"].items():
        rows.append(
            (
                name,
                f"{m['jct_mean_s'] / SECONDS_PER_HOUR:.2f} h",
                f"{m['jct_p99_s'] / SECONDS_PER_HOUR:.1f} h",
                f"{m['wait_mean_s'] / SECONDS_PER_HOUR:.2f} h",
                f"{m['wait_p99_s'] / SECONDS_PER_HOUR:.2f} h",
                f"{100 * m['utilisation']:.1f}%",
                str(m["preemptions"]),
                f"{m['gpu_hours_lost']:.1f} ({100 * m['gpu_hours_lost_fraction']:.3f}%)",
                f"{100 * m['share_deviation']:.2f}%",
                describe_worse_than_alone(m.get("tenants_worse_than_alone")),
                describe_ratio(m.get("finish_time_fairness_max")),
            )
        )
    title = (
        f"{document['trace']}: {document['jobs']} jobs, {document['gpu_hours']:,.0f} GPU-hours, "
        f"{document['capacity_gpus']} GPUs, {document['days']:g} days"
    )
    header = (
        "policy",
        "JCT mean",
        "JCT p99",
        "wait mean",
        "wait p99",
        "utilisation",
        "preemptions",
        "GPU-h lost",
        "share deviation",
        "tenants worse than alone",
        "worst JCT / alone",
    )
    return Table(title=title, header=header, rows=tuple(rows))


def queueing_tenant_table(document: dict[str, Any]) -> Table:
    """B3, per tenant: deserved GPUs, jobs, GPU-hours, and the mean wait (hours) alone on its
    deserved share and under each policy, then the p99 wait under each policy."""
    policies = document["policies"]
    names = list(policies)
    first: dict[str, Any] = policies[names[0]]["tenants"] if names else {}
    rows = []
    for tenant in sorted(first):
        base = first[tenant]
        cells = [
            tenant,
            str(base["deserved_gpus"]),
            str(base["jobs"]),
            f"{base['gpu_hours']:,.0f}",
            hours(base.get("alone_wait_mean_s")),
        ]
        cells += [hours(policies[n]["tenants"][tenant]["wait_mean_s"]) for n in names]
        cells += [
            f"{policies[n]['tenants'][tenant]['wait_p99_s'] / SECONDS_PER_HOUR:.1f}" for n in names
        ]
        rows.append(tuple(cells))
    header = ("tenant", "deserved GPUs", "jobs", "GPU-h", "alone", *names)
    header += tuple(f"p99 {n}" for n in names)
    return Table(
        title="mean wait per tenant (hours): shared vs alone on its deserved share; p99 wait",
        header=header,
        rows=tuple(rows),
    )


def html_table(table: Table) -> str:
    """The table as HTML, its title as the caption."""
    parts = ["<table border='1' cellpadding='4'>"]
    parts.append(f"<caption>{html.escape(table.title)}</caption>")
    parts.append("<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in table.header) + "</tr>")
    for row in table.rows:
        parts.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    parts.append("</table>")
    return "\n".join(parts)


def markdown_table(table: Table) -> str:
    """The table as a markdown table (no title)."""
    lines = ["| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(row) + " |" for row in table.rows]
    return "\n".join(lines)


def rich_table(table: Table) -> RichTable:
    """The table for a terminal: the first column left-aligned, the others right-aligned."""
    result = RichTable(title=table.title)
    for i, heading in enumerate(table.header):
        result.add_column(heading, justify="left" if i == 0 else "right")
    for row in table.rows:
        result.add_row(*row)
    return result


# -- figures and pages ------------------------------------------------------------------------


def placement_figure(run: TraceRun) -> Figure:
    """B2, one trace: the seed-mean curves of every policy (`charts.load_curves_figure`)."""
    curves = {policy: run.mean_curves(policy) for policy in run.policies}
    seeds = ", ".join(str(s) for s in run.seeds)
    label = "seed" if len(run.seeds) == 1 else "seeds"
    return load_curves_figure(
        f"openb {run.trace} ({label} {seeds})",
        {policy: allocation for policy, (allocation, _) in curves.items()},
        {policy: fragmentation for policy, (_, fragmentation) in curves.items()},
    )


def wait_figure(run: PhillyRun) -> Figure:
    """B3: every job's wait in hours, per tenant and policy (`charts.wait_boxes_figure`)."""
    return wait_boxes_figure(
        {
            policy: {
                tenant: [wait / SECONDS_PER_HOUR for wait in entry.waits_s]
                for tenant, entry in metrics.tenants.items()
            }
            for policy, metrics in run.metrics.items()
        }
    )


def alone_figure(run: PhillyRun) -> Figure:
    """B3: each tenant's mean wait alone on its deserved share and under each policy
    (`charts.shared_vs_alone_figure`)."""
    tenants = sorted(run.shares)
    alone = [
        sum(r.wait_s for r in run.alone[t].records) / len(run.alone[t].records) / SECONDS_PER_HOUR
        if t in run.alone and run.alone[t].records
        else None
        for t in tenants
    ]
    shared = {
        policy: [
            metrics.tenants[t].wait_mean_s / SECONDS_PER_HOUR if t in metrics.tenants else None
            for t in tenants
        ]
        for policy, metrics in run.metrics.items()
    }
    return shared_vs_alone_figure(tenants, alone, shared)


def _figure_html(figure: Figure, with_plotly_js: bool) -> str:
    """A figure as an HTML fragment; plotly.js is inlined into the first one of a page."""
    fragment: str = plotly.io.to_html(figure, full_html=False, include_plotlyjs=with_plotly_js)
    return fragment


def _page(title: str, heading: str, body: Sequence[str]) -> str:
    """A whole HTML page."""
    head = f"<html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
    return "\n".join([head, f"<body><h1>{html.escape(heading)}</h1>", *body, "</body></html>"])


def write_placement_report(runs: Sequence[TraceRun], path: Path) -> None:
    """B2: one page with, per trace, its figure and its table."""
    body: list[str] = []
    for i, run in enumerate(runs):
        body.append(f"<h2>{html.escape(run.trace)}</h2>")
        body.append(_figure_html(placement_figure(run), with_plotly_js=i == 0))
        body.append(html_table(placement_table(run.to_json())))
    page = _page("gpupool B2 placement quality", "Placement quality on openb (B2)", body)
    path.write_text(page, encoding="utf-8")


def write_queueing_report(run: PhillyRun, path: Path) -> None:
    """B3 (or the same on a synthetic trace): one page with the policy table and both figures."""
    if run.trace == "philly":
        title, heading = "gpupool B3 Philly queueing", "Multi-tenant queueing on Philly (B3)"
    else:
        drawn = ", ".join(f"{k} {v}" for k, v in run.source.items())
        title = f"gpupool queueing on a {run.trace} trace"
        heading = f"Multi-tenant queueing on a {run.trace} trace ({drawn})"
    limit = f", first {run.limit} jobs" if run.limit else ""
    body = [
        f"<p>{run.jobs} jobs ({run.gpu_hours:,.0f} GPU-hours) arriving in each tenant's first "
        f"{run.days:g} days{limit}, on {run.capacity_gpus} GPUs.</p>",
        html_table(queueing_policy_table(run.to_json())),
        _figure_html(wait_figure(run), with_plotly_js=True),
    ]
    if run.alone:
        body.append(_figure_html(alone_figure(run), with_plotly_js=False))
    path.write_text(_page(title, heading, body), encoding="utf-8")
