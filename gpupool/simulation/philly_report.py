"""Self-contained HTML report of a B3 run: summary table and wait distributions per tenant."""

from __future__ import annotations

import html
from pathlib import Path

import plotly.graph_objects as go
from plotly.colors import qualitative

from gpupool.simulation.queueing.metrics import describe_worse_than_alone
from gpupool.simulation.queueing.philly import PhillyRun

HOUR_S = 3600.0
ALONE_COLOUR = "#9e9e9e"


def policy_colours(run: PhillyRun) -> dict[str, str]:
    """One colour per policy, the same in every figure of the report."""
    palette = qualitative.Plotly
    return {policy: palette[i % len(palette)] for i, policy in enumerate(run.metrics)}


def wait_figure(run: PhillyRun) -> go.Figure:
    """Box plots of queueing delay (hours) per tenant, one colour per policy."""
    figure = go.Figure()
    colours = policy_colours(run)
    for policy, metrics in run.metrics.items():
        xs: list[str] = []
        ys: list[float] = []
        for tenant, entry in metrics.tenants.items():
            xs.extend([tenant] * len(entry.waits_s))
            ys.extend(w / HOUR_S for w in entry.waits_s)
        figure.add_trace(
            go.Box(x=xs, y=ys, name=policy, boxpoints=False, marker_color=colours[policy])
        )
    figure.update_layout(
        boxmode="group",
        title="Queueing delay per tenant (hours)",
        yaxis={"title": "wait (h)", "type": "log"},
        height=500,
    )
    return figure


def alone_figure(run: PhillyRun) -> go.Figure:
    """Mean wait per tenant under each policy against alone on its deserved share."""
    figure = go.Figure()
    tenants = sorted(run.shares)
    alone = [
        sum(r.wait_s for r in run.alone[t].records) / len(run.alone[t].records) / HOUR_S
        if t in run.alone and run.alone[t].records
        else None
        for t in tenants
    ]
    figure.add_trace(
        go.Bar(x=tenants, y=alone, name="alone on deserved share", marker_color=ALONE_COLOUR)
    )
    colours = policy_colours(run)
    for policy, metrics in run.metrics.items():
        ys = [
            metrics.tenants[t].wait_mean_s / HOUR_S if t in metrics.tenants else None
            for t in tenants
        ]
        figure.add_trace(go.Bar(x=tenants, y=ys, name=policy, marker_color=colours[policy]))
    figure.update_layout(
        barmode="group", title="Mean wait per tenant (hours): shared vs alone", height=450
    )
    return figure


def _cell(value: object) -> str:
    return f"<td>{html.escape(str(value))}</td>"


def write_report(run: PhillyRun, path: Path) -> None:
    """Write one HTML page (plotly.js inlined) with the table and both figures."""
    if run.trace == "philly":
        title, heading = "gpupool B3 Philly queueing", "Multi-tenant queueing on Philly (B3)"
    else:
        drawn = ", ".join(f"{k} {v}" for k, v in run.source.items())
        title = f"gpupool queueing on a {run.trace} trace"
        heading = f"Multi-tenant queueing on a {run.trace} trace ({drawn})"
    parts = [f"<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"]
    parts.append(f"</head><body><h1>{html.escape(heading)}</h1>")
    limit = f", first {run.limit} jobs" if run.limit else ""
    parts.append(
        f"<p>{run.jobs} jobs ({run.gpu_hours:,.0f} GPU-hours) arriving in each tenant's first "
        f"{run.days:g} days{limit}, on {run.capacity_gpus} GPUs.</p>"
    )
    parts.append("<table border='1' cellpadding='4'><tr>")
    headers = (
        "policy",
        "JCT mean (h)",
        "JCT p99 (h)",
        "wait mean (h)",
        "wait p99 (h)",
        "utilisation",
        "preemptions",
        "GPU-h lost",
        "lost %",
        "share deviation",
        "worse than alone",
    )
    parts.append("".join(f"<th>{h}</th>" for h in headers) + "</tr>")
    for policy, m in run.metrics.items():
        cells = (
            policy,
            f"{m.jct_mean_s / HOUR_S:.2f}",
            f"{m.jct_p99_s / HOUR_S:.1f}",
            f"{m.wait_mean_s / HOUR_S:.2f}",
            f"{m.wait_p99_s / HOUR_S:.1f}",
            f"{m.utilisation:.1%}",
            m.preemptions,
            f"{m.gpu_hours_lost:,.0f}",
            f"{m.gpu_hours_lost_fraction:.2%}",
            f"{m.share_deviation:.1%}",
            describe_worse_than_alone(m.tenants_worse_than_alone),
        )
        parts.append("<tr>" + "".join(_cell(c) for c in cells) + "</tr>")
    parts.append("</table>")
    parts.append(wait_figure(run).to_html(full_html=False, include_plotlyjs=True))
    if run.alone:
        parts.append(alone_figure(run).to_html(full_html=False, include_plotlyjs=False))
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
