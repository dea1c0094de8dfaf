"""Figure builders: pure functions from plain numbers to Plotly figure dicts.

A figure is a dict with ``data`` (one dict per trace) and ``layout``, as Plotly's JSON schema
writes it, so the same figure can be serialised into a page for plotly.js or written into a
self-contained HTML report (``gpupool.simulation.report``). The builders know nothing of
where the numbers come from -- a simulation run, or later the database behind a dashboard
page -- and nothing here does I/O.

Each series (a policy) keeps one colour in every figure built from the same names in the same
order, so one legend reads for all of a page's figures; a baseline that is not a policy (a
tenant alone on its share) is grey.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, tzinfo
from typing import Any

from plotly.colors import qualitative

from gpupool.dashboard.palette import FREE_GPU, UI
from gpupool.number_formats import GPU_HOURS_PLACES, GPU_PLACES

Figure = dict[str, Any]

# The pages' number rule in a hover (plotly.js's d3-format): GPUs to the milli-GPU, GPU-hours
# to the hundredth, thousands separated; ``~`` drops the trailing zeros (8, 0.5, 1,234.25).
GPU_HOVER = f",.{GPU_PLACES}~f"
GPU_HOURS_HOVER = f",.{GPU_HOURS_PLACES}~f"

PALETTE: tuple[str, ...] = tuple(qualitative.Plotly)  # plotly.js's default colour sequence
BASELINE_COLOUR = "#9e9e9e"
SUBPLOT_TITLE_FONT_SIZE = 16  # what plotly's make_subplots gives a panel title


def series_colours(names: Iterable[str]) -> dict[str, str]:
    """One colour per name, in order of first appearance (the palette repeats after ten)."""
    ordered = list(dict.fromkeys(names))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(ordered)}


def _two_panels(titles: tuple[str, str], x_title: str) -> dict[str, Any]:
    """The layout of two side-by-side panels sharing an x-axis title, each with a title."""
    annotations = [
        {
            "text": title,
            "x": centre,
            "y": 1.0,
            "xref": "paper",
            "yref": "paper",
            "xanchor": "center",
            "yanchor": "bottom",
            "showarrow": False,
            "font": {"size": SUBPLOT_TITLE_FONT_SIZE},
        }
        for title, centre in zip(titles, (0.225, 0.775), strict=True)
    ]
    return {
        "xaxis": {"anchor": "y", "domain": [0.0, 0.45], "title": {"text": x_title}},
        "yaxis": {"anchor": "x", "domain": [0.0, 1.0]},
        "xaxis2": {"anchor": "y2", "domain": [0.55, 1.0], "title": {"text": x_title}},
        "yaxis2": {"anchor": "x2", "domain": [0.0, 1.0]},
        "annotations": annotations,
    }


def load_curves_figure(
    title: str,
    allocation_pct: Mapping[str, Mapping[int, float]],
    fragmentation_pct: Mapping[str, Mapping[int, float]],
) -> Figure:
    """GPU allocation ratio (left) and fragmentation rate (right), in %, against arrived GPU
    demand in % of capacity: one line per policy, the same colour in both panels."""
    colours = series_colours([*allocation_pct, *fragmentation_pct])
    data: list[dict[str, Any]] = []
    for axis, curves in (("", allocation_pct), ("2", fragmentation_pct)):
        for policy, curve in curves.items():
            data.append(
                {
                    "type": "scatter",
                    "x": list(curve),
                    "y": list(curve.values()),
                    "name": policy,
                    "legendgroup": policy,
                    "showlegend": axis == "",
                    "line": {"color": colours[policy]},
                    "xaxis": f"x{axis}",
                    "yaxis": f"y{axis}",
                }
            )
    layout = _two_panels(
        ("GPU allocation ratio (%)", "Fragmentation rate (% of idle GPU)"),
        "arrived GPU demand (% of capacity)",
    )
    layout |= {"title": {"text": title}, "height": 450}
    return {"data": data, "layout": layout}


def wait_boxes_figure(waits_h: Mapping[str, Mapping[str, Sequence[float]]]) -> Figure:
    """Box plots of queueing delay in hours per tenant (log axis), one colour per policy.

    ``waits_h[policy][tenant]`` is every wait of the tenant's jobs under the policy.
    """
    colours = series_colours(waits_h)
    data = []
    for policy, tenants in waits_h.items():
        xs: list[str] = []
        ys: list[float] = []
        for tenant, waits in tenants.items():
            xs.extend([tenant] * len(waits))
            ys.extend(waits)
        data.append(
            {
                "type": "box",
                "x": xs,
                "y": ys,
                "name": policy,
                "boxpoints": False,
                "marker": {"color": colours[policy]},
            }
        )
    layout = {
        "boxmode": "group",
        "title": {"text": "Queueing delay per tenant (hours)"},
        "yaxis": {"title": {"text": "wait (h)"}, "type": "log"},
        "height": 500,
    }
    return {"data": data, "layout": layout}


def shared_vs_alone_figure(
    tenants: Sequence[str],
    alone_h: Sequence[float | None],
    shared_h: Mapping[str, Sequence[float | None]],
) -> Figure:
    """Mean wait in hours per tenant: alone on its deserved share (grey), then under each
    policy. ``alone_h`` and every ``shared_h[policy]`` follow ``tenants``; None: no value."""
    for name, values in {"alone": alone_h, **shared_h}.items():
        if len(values) != len(tenants):
            raise ValueError(f"{name}: {len(values)} values for {len(tenants)} tenants")
    colours = series_colours(shared_h)
    data = [
        {
            "type": "bar",
            "x": list(tenants),
            "y": list(alone_h),
            "name": "alone on deserved share",
            "marker": {"color": BASELINE_COLOUR},
        }
    ]
    data += [
        {
            "type": "bar",
            "x": list(tenants),
            "y": list(values),
            "name": policy,
            "marker": {"color": colours[policy]},
        }
        for policy, values in shared_h.items()
    ]
    layout = {
        "barmode": "group",
        "title": {"text": "Mean wait per tenant (hours): shared vs alone"},
        "height": 450,
    }
    return {"data": data, "layout": layout}


# ----------------------------------------------------------------------------- the pages


def _page_layout(**fields: Any) -> dict[str, Any]:
    """What every page figure shares: the page's font and colours, room for the axes, and
    no title inside the figure (the page's heading names it)."""
    return {
        "font": {"family": "system-ui, sans-serif", "size": 13, "color": UI["text"]},
        "paper_bgcolor": UI["page"],
        "plot_bgcolor": UI["page"],
        "margin": {"l": 60, "r": 20, "t": 20, "b": 50},
    } | fields


def wall_times(moments: Iterable[datetime], zone: tzinfo) -> list[str]:
    """Moments as a date axis's x values in ``zone``: its wall time, ISO 8601 without an
    offset (plotly.js draws the wall time it is given and ignores an offset, so a time in
    UTC is drawn as UTC whatever the viewer's zone). The pages pass the zone their tables use
    (Django's current one: the viewer's); ``time_axis`` names it."""
    return [moment.astimezone(zone).replace(tzinfo=None).isoformat() for moment in moments]


# A date axis's tick labels by the distance between ticks (milliseconds): seconds only when
# ticks are seconds apart, hours and minutes within a day, the date beyond; never plotly's
# fractions of a second ("14:37:35.0185", which it draws around a lone point).
TIME_TICKS = (
    {"dtickrange": [None, 60_000], "value": "%H:%M:%S"},
    {"dtickrange": [60_000, 86_400_000], "value": "%H:%M"},
    {"dtickrange": [86_400_000, None], "value": "%b %d"},
)
# The moment a hover names: to the minute, as the pages' tables.
TIME_HOVER = "%Y-%m-%d %H:%M"
# Lines over time also mark each point, so that a lone one (a pool's first minutes, a flavor
# sampled once) shows where "lines" alone draws nothing.
LINE_MARKER = {"size": 4}


def time_axis(zone: str | None, **fields: Any) -> dict[str, Any]:
    """A date axis whose title names the zone its times are in (``time (Europe/Berlin)``),
    the zone ``wall_times`` was given; None: no title (a figure whose times are unzoned).
    Its ticks read as times (``TIME_TICKS``), unless ``fields`` gives a ``tickformat``."""
    axis: dict[str, Any] = {"type": "date", "hoverformat": TIME_HOVER}
    if "tickformat" not in fields:
        axis["tickformatstops"] = [dict(stop) for stop in TIME_TICKS]
    if zone:
        axis["title"] = {"text": f"time ({zone})", "standoff": 4}
    return axis | fields


def whole_step(largest: float, ticks: int = 5) -> int:
    """A tick step of 1, 2 or 5 times a power of ten giving at most about ``ticks`` ticks up
    to ``largest`` (counts of whole things: never a fraction)."""
    power = 1
    while largest / power > ticks:
        for step in (2 * power, 5 * power, 10 * power):
            if largest / step <= ticks:
                return step
        power *= 10
    return power


def pending_reasons_figure(counts: Mapping[str, int]) -> Figure:
    """Pending workloads by the reason they wait, as horizontal bars, most frequent on top
    (ties by reason)."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    most = max(counts.values(), default=0)
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "x": [count for _, count in ordered],
                "y": [reason for reason, _ in ordered],
                "marker": {"color": UI["bar"]},
                "hovertemplate": "%{y}: %{x} workloads<extra></extra>",
            }
        ],
        "layout": _page_layout(
            height=max(160, 40 + 32 * len(ordered)),
            # whole workloads: a tick every 1, 2, 5, 10... so that about five show
            xaxis={
                "title": {"text": "pending workloads"},
                "rangemode": "tozero",
                "tick0": 0,
                "dtick": whole_step(most),
            },
            yaxis={"autorange": "reversed", "automargin": True},
        ),
    }


def what_if_waits_figure(wait_changes: Mapping[str, Mapping[str, Any]]) -> Figure:
    """Each tenant's mean wait in hours with today's quotas (dark grey) and with the change
    (accent), from a what-if run's ``wait_changes``; a tenant absent from one replay has
    no bar there."""
    tenants = list(wait_changes)

    def hours(replay: str) -> list[float | None]:
        values: list[float | None] = []
        for tenant in tenants:
            seconds = (wait_changes[tenant].get("wait_mean_s") or {}).get(replay)
            values.append(None if seconds is None else round(seconds / 3600, 3))
        return values

    return {
        "data": [
            {
                "type": "bar",
                "x": tenants,
                "y": hours("before"),
                "name": "today's quotas",
                "marker": {"color": UI["muted"]},
                "hovertemplate": "%{x}: %{y:.2f} h<extra>today</extra>",
            },
            {
                "type": "bar",
                "x": tenants,
                "y": hours("after"),
                "name": "with the change",
                "marker": {"color": UI["accent"]},
                "hovertemplate": "%{x}: %{y:.2f} h<extra>with the change</extra>",
            },
        ],
        "layout": _page_layout(
            barmode="group",
            height=320,
            yaxis={"title": {"text": "mean wait (hours)"}, "rangemode": "tozero"},
            legend={"orientation": "h", "y": -0.2},
        ),
    }


def allocation_area_figure(
    times: Sequence[str],
    series: Mapping[str, Sequence[float]],
    colours: Mapping[str, str],
    zone: str | None = None,
    unit: str = "GPUs",
) -> Figure:
    """GPUs allocated over time as a stacked area: one band per series (a tenant and flavor,
    say ``nlp · h100``), at ``times`` (``wall_times`` in ``zone``, which the axis names);
    ``colours`` by series name. ``unit``: what the series count, plural (``MIG instances``
    for MIG flavors, stacked in a figure of their own: never on top of GPUs)."""
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "marker": LINE_MARKER,
            "stackgroup": "allocated",
            "x": list(times),
            "y": list(values),
            "name": name,
            "line": {"width": 0.5, "color": colours.get(name, UI["muted"])},
            "hovertemplate": f"{name}: %{{y:{GPU_HOVER}}} {unit}<extra></extra>",
        }
        for name, values in series.items()
    ]
    return {
        "data": data,
        "layout": _page_layout(
            height=340,
            xaxis=time_axis(zone),
            yaxis={"title": {"text": f"{unit} allocated"}, "rangemode": "tozero"},
            legend={"orientation": "h", "y": -0.3},
            hovermode="x unified",
        ),
    }


def cycle_phases_figure(labels: Sequence[str], phases: Mapping[str, Sequence[float]]) -> Figure:
    """Each cycle's duration by phase (seconds) as stacked bars, one bar per cycle label
    (oldest first), one colour per phase in the order given."""
    colours = series_colours(phases)
    return {
        "data": [
            {
                "type": "bar",
                "x": list(labels),
                "y": list(seconds),
                "name": phase,
                "marker": {"color": colours[phase]},
                "hovertemplate": f"{phase}: %{{y:.3f}} s<extra></extra>",
            }
            for phase, seconds in phases.items()
        ],
        "layout": _page_layout(
            barmode="stack",
            height=280,
            xaxis={"type": "category", "title": {"text": "cycle"}},
            yaxis={"title": {"text": "seconds"}, "rangemode": "tozero"},
            legend={"orientation": "h", "y": -0.35},
        ),
    }


def preemptions_over_time_figure(
    days: Sequence[str], counts: Mapping[str, Sequence[int]], colours: Mapping[str, str]
) -> Figure:
    """Preemptions per day (``days``, ISO dates) as stacked bars, one colour per reason."""
    most = max((sum(day) for day in zip(*counts.values(), strict=True)), default=0)
    return {
        "data": [
            {
                "type": "bar",
                "x": list(days),
                "y": list(values),
                "name": reason,
                "marker": {"color": colours.get(reason, UI["muted"])},
                "hovertemplate": f"{reason}: %{{y}}<extra>%{{x}}</extra>",
            }
            for reason, values in counts.items()
        ],
        "layout": _page_layout(
            barmode="stack",
            height=280,
            xaxis={"type": "date", "dtick": 86_400_000, "tickformat": "%b %d"},
            yaxis={
                "title": {"text": "preemptions"},
                "rangemode": "tozero",
                "tick0": 0,
                "dtick": whole_step(most),
            },
            legend={"orientation": "h", "y": -0.3},
        ),
    }


def fragmentation_trend_figure(
    times: Sequence[str],
    lines: Mapping[str, Sequence[float]],
    zone: str | None = None,
    unit: str = "GPUs",
) -> Figure:
    """Lines over time (``times``: ``wall_times`` in ``zone``, which the axis names) of a
    flavor's fragmentation figures in ``unit`` (plural: GPUs, a MIG flavor's MIG instances),
    e.g. free, fragmented and the largest gang in one NVLink domain."""
    colours = series_colours(lines)
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "marker": LINE_MARKER,
                "x": list(times),
                "y": list(values),
                "name": name,
                "line": {"color": colours[name]},
                "hovertemplate": f"{name}: %{{y:{GPU_HOVER}}} {unit}<extra></extra>",
            }
            for name, values in lines.items()
        ],
        "layout": _page_layout(
            height=300,
            xaxis=time_axis(zone),
            yaxis={"title": {"text": unit}, "rangemode": "tozero"},
            legend={"orientation": "h", "y": -0.35},
            hovermode="x unified",
        ),
    }


def workload_timeline_figure(
    spans: Sequence[tuple[str, str, str]], colours: Mapping[str, str], zone: str | None = None
) -> Figure:
    """A workload's life as one bar per state it was in, from ``spans`` of (state, start,
    end) with times in order (``wall_times`` in ``zone``, which the axis names); a state
    keeps one colour (``colours``)."""
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "x": [start, end],
            "y": ["", ""],
            "name": state,
            "legendgroup": state,
            "showlegend": state not in [s for s, _, _ in spans[:index]],
            "line": {"color": colours.get(state, UI["muted"]), "width": 18},
            "hovertemplate": f"{state}: %{{x}}<extra></extra>",
        }
        for index, (state, start, end) in enumerate(spans)
    ]
    return {
        "data": data,
        "layout": _page_layout(
            height=160,
            margin={"l": 20, "r": 20, "t": 10, "b": 60},
            xaxis=time_axis(zone),
            yaxis={"visible": False},
            legend={"orientation": "h", "y": -0.5},
        ),
    }


def gpu_heatmap_figure(
    nodes: Sequence[str],
    categories: Sequence[Sequence[str]],
    texts: Sequence[Sequence[str]],
    colours: Mapping[str, str],
    dim: str = FREE_GPU,
    cell: str = "GPU",
) -> Figure:
    """Every GPU of ``nodes`` (one row each, top to bottom; a column per GPU index), coloured
    by its category (a tenant, free, broken...) in ``colours``; ``texts`` is each cell's hover;
    ``cell``: what a column is, the x axis's title (a MIG flavor's: ``MIG instance``).
    Rows shorter than the widest are padded with empty cells. The categories and colours go
    into ``layout.meta`` for the page's highlighting (``frontend/js/heatmap.js``), with ``dim``,
    the colour the other categories take when one is highlighted."""
    names = list(colours)
    index = {name: position for position, name in enumerate(names)}
    width = max((len(row) for row in categories), default=0)
    steps = max(len(names), 1)
    colorscale: list[list[Any]] = []
    for position, name in enumerate(names):
        colorscale += [[position / steps, colours[name]], [(position + 1) / steps, colours[name]]]

    def padded(row: Sequence[Any], value: Any) -> list[Any]:
        return [*row, *([value] * (width - len(row)))]

    z = [padded([index[c] + 0.5 for c in row], None) for row in categories]
    return {
        "data": [
            {
                "type": "heatmap",
                "x": list(range(width)),
                "y": list(nodes),
                "z": z,
                "text": [padded(row, "") for row in texts],
                "hovertemplate": "%{text}<extra></extra>",
                "colorscale": colorscale or [[0, UI["page"]], [1, UI["page"]]],
                "zmin": 0,
                "zmax": steps,
                "showscale": False,
                "xgap": 2,
                "ygap": 2,
            }
        ],
        "layout": _page_layout(
            height=max(160, 60 + 16 * len(nodes)),
            margin={"l": 110, "r": 10, "t": 10, "b": 40},
            xaxis={
                "title": {"text": cell},
                "dtick": 1,
                "fixedrange": True,
                "showgrid": False,
                "zeroline": False,
            },
            yaxis={
                "autorange": "reversed",
                "automargin": True,
                "fixedrange": True,
                "showgrid": False,
                "zeroline": False,
                "ticks": "",
            },
            meta={"categories": names, "colours": [colours[name] for name in names], "dim": dim},
        ),
    }


def cost_trend_figure(
    months: Sequence[str],
    charged: Mapping[str, Sequence[float]],
    capacity: Sequence[float | None],
    colours: Mapping[str, str],
) -> Figure:
    """GPU-hours charged to each team per month (``months``, ``2026-03``) as stacked bars,
    one colour per team, under a line of the pool's healthy capacity in GPU-hours (None:
    a month not rolled up, left as a gap)."""
    bars = [
        {
            "type": "bar",
            "x": list(months),
            "y": list(values),
            "name": team,
            "marker": {"color": colours.get(team, UI["muted"])},
            "hovertemplate": f"{team}: %{{y:{GPU_HOURS_HOVER}}} GPU-h<extra>%{{x}}</extra>",
        }
        for team, values in charged.items()
    ]
    line = {
        "type": "scatter",
        "mode": "lines+markers",
        "x": list(months),
        "y": list(capacity),
        "name": "healthy capacity",
        "line": {"color": UI["text"], "dash": "dot"},
        "hovertemplate": f"healthy capacity: %{{y:{GPU_HOURS_HOVER}}} GPU-h<extra>%{{x}}</extra>",
    }
    return {
        "data": [*bars, line],
        "layout": _page_layout(
            barmode="stack",
            height=300,
            xaxis={"type": "category", "title": {"text": "month"}},
            yaxis={"title": {"text": "GPU-hours"}, "rangemode": "tozero"},
            legend={"orientation": "h", "y": -0.3},
        ),
    }


def _hourly_gpus_layout(zone: str | None) -> dict[str, Any]:
    """The layout the Utilisation page's two figures share: GPUs as hourly means over time in
    ``zone``, the legend below."""
    return _page_layout(
        height=320,
        xaxis=time_axis(zone),
        yaxis={"title": {"text": "GPUs (hourly mean)"}, "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.3},
        hovermode="x unified",
    )


def allocated_vs_active_figure(
    times: Sequence[str],
    allocated: Sequence[float],
    active: Sequence[float] | None,
    capacity: float | None = None,
    zone: str | None = None,
) -> Figure:
    """The pool's GPUs allocated against those that worked, hour by hour (``times``:
    ``wall_times`` in ``zone``, which the axis names; each value an hour's mean GPUs): the
    allocated line, the active area under it (the gap between them is the idle allocated),
    and the healthy capacity as a dotted line. ``active`` None: not measured (no utilisation
    source), so the allocated line alone, with no gap drawn as idle."""
    if active is None:
        data: list[dict[str, Any]] = [
            {
                "type": "scatter",
                "mode": "lines",
                "x": list(times),
                "y": list(allocated),
                "name": "allocated (use not measured)",
                "line": {"color": UI["warn"], "width": 2},
                "hovertemplate": f"allocated: %{{y:{GPU_HOVER}}} GPUs<extra></extra>",
            }
        ]
    else:
        data = [
            {
                "type": "scatter",
                "mode": "lines",
                "x": list(times),
                "y": list(active),
                "name": "active",
                "fill": "tozeroy",
                "line": {"color": UI["ok"], "width": 2},
                "hovertemplate": f"active: %{{y:{GPU_HOVER}}} GPUs<extra></extra>",
            },
            {
                "type": "scatter",
                "mode": "lines",
                "x": list(times),
                "y": list(allocated),
                "name": "allocated",
                "fill": "tonexty",
                "fillcolor": "rgba(138, 90, 0, 0.25)",
                "line": {"color": UI["warn"], "width": 2},
                "hovertemplate": f"allocated: %{{y:{GPU_HOVER}}} GPUs<extra></extra>",
            },
        ]
    if capacity is not None:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": list(times),
                "y": [capacity] * len(times),
                "name": "healthy capacity",
                "line": {"color": UI["text"], "dash": "dot", "width": 1},
                "hovertemplate": f"healthy capacity: %{{y:{GPU_HOVER}}} GPUs<extra></extra>",
            }
        )
    return {
        "data": data,
        "layout": _hourly_gpus_layout(zone),
    }


def team_utilization_figure(
    times: Sequence[str],
    allocated: Mapping[str, Sequence[float]],
    active: Mapping[str, Sequence[float]] | None,
    colours: Mapping[str, str],
    zone: str | None = None,
) -> Figure:
    """Each team's GPUs allocated (solid) against active (dotted, same colour), hour by hour
    (``times``: ``wall_times`` in ``zone``, which the axis names); the teams of
    ``allocated`` in its order. ``active`` None: not measured (no utilisation source), no
    active lines."""
    data: list[dict[str, Any]] = []
    for team, values in allocated.items():
        colour = colours.get(team, UI["muted"])
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": list(times),
                "y": list(values),
                "name": f"{team} allocated",
                "legendgroup": team,
                "line": {"color": colour, "width": 2},
                "hovertemplate": f"{team} allocated: %{{y:{GPU_HOVER}}} GPUs<extra></extra>",
            }
        )
        if active is None:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": list(times),
                "y": list(active.get(team, [0.0] * len(times))),
                "name": f"{team} active",
                "legendgroup": team,
                "line": {"color": colour, "width": 2, "dash": "dot"},
                "hovertemplate": f"{team} active: %{{y:{GPU_HOVER}}} GPUs<extra></extra>",
            }
        )
    return {
        "data": data,
        "layout": _hourly_gpus_layout(zone),
    }


def sparkline_figure(
    times: Sequence[str], utilization: Sequence[float], zone: str | None = None
) -> Figure:
    """A workload's GPU utilisation (percent, 0-100) window by window (``times``:
    ``wall_times`` in ``zone``, which the axis names), as a small line with no axes'
    furniture but the 0-100 range."""
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "x": list(times),
                "y": list(utilization),
                "name": "GPU utilisation",
                "fill": "tozeroy",
                "line": {"color": UI["accent"], "width": 1.5},
                "hovertemplate": "%{y:.0f} %<extra>%{x}</extra>",
            }
        ],
        "layout": _page_layout(
            height=130,
            margin={"l": 50, "r": 10, "t": 12, "b": 45},
            showlegend=False,
            xaxis=time_axis(zone, showgrid=False, tickformat="%H:%M"),
            yaxis={"range": [0, 100], "tickvals": [0, 50, 100], "ticksuffix": " %"},
        ),
    }
