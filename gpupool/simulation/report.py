"""Self-contained HTML report of an openb sweep: allocation and fragmentation curves (Plotly)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from gpupool.simulation.placement.experiment import TraceRun


def trace_figure(run: TraceRun) -> go.Figure:
    """Allocation ratio and fragmentation rate against arrived load, one line per policy."""
    figure = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("GPU allocation ratio (%)", "Fragmentation rate (% of idle GPU)"),
    )
    palette = qualitative.Plotly
    for index, policy in enumerate(run.policies):
        allocation, fragmentation = run.mean_curves(policy)
        line = {"color": palette[index % len(palette)]}  # one colour per policy, both panels
        figure.add_trace(
            go.Scatter(
                x=list(allocation),
                y=list(allocation.values()),
                name=policy,
                legendgroup=policy,
                line=line,
            ),
            row=1,
            col=1,
        )
        figure.add_trace(
            go.Scatter(
                x=list(fragmentation),
                y=list(fragmentation.values()),
                name=policy,
                legendgroup=policy,
                showlegend=False,
                line=line,
            ),
            row=1,
            col=2,
        )
    seeds = ", ".join(str(s) for s in run.seeds)
    label = "seed" if len(run.seeds) == 1 else "seeds"
    figure.update_layout(title=f"openb {run.trace} ({label} {seeds})", height=450)
    figure.update_xaxes(title_text="arrived GPU demand (% of capacity)")
    return figure


def write_report(runs: Sequence[TraceRun], path: Path) -> None:
    """Write one HTML page with a figure and a summary table per trace (plotly.js inlined)."""
    parts = ["<html><head><meta charset='utf-8'><title>gpupool B2 placement quality</title>"]
    parts.append("</head><body><h1>Placement quality on openb (B2)</h1>")
    for i, run in enumerate(runs):
        parts.append(f"<h2>{html.escape(run.trace)}</h2>")
        parts.append(trace_figure(run).to_html(full_html=False, include_plotlyjs=(i == 0)))
        document = run.to_json()
        parts.append("<table border='1' cellpadding='4'><tr><th>policy</th>")
        parts.append("<th>alloc @100%</th><th>alloc @130%</th><th>frag rate @100%</th></tr>")
        for policy, entry in document["policies"].items():
            alloc = entry["allocation_ratio"]
            frag = entry["fragmentation_rate"]["1.0"]
            cells = "".join(
                f"<td>{'' if v is None else f'{v:.2%}'}</td>"
                for v in (alloc["1.0"], alloc["1.3"], frag)
            )
            parts.append(f"<tr><td>{html.escape(policy)}</td>{cells}</tr>")
        parts.append("</table>")
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
