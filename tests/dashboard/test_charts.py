"""The figure builders return plain Plotly figure dicts: checked as data, and as valid Plotly."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from gpupool.dashboard import charts
from gpupool.dashboard.charts import (
    BASELINE_COLOUR,
    PALETTE,
    allocation_area_figure,
    cycle_phases_figure,
    gpu_heatmap_figure,
    load_curves_figure,
    pending_reasons_figure,
    preemptions_over_time_figure,
    series_colours,
    shared_vs_alone_figure,
    wait_boxes_figure,
    what_if_waits_figure,
    workload_timeline_figure,
)
from gpupool.dashboard.palette import UI

ALLOCATION = {"fgd": {100: 95.0, 130: 95.5}, "gpupool": {100: 96.0, 130: 96.2}}
FRAGMENTATION = {"fgd": {100: 99.6}, "gpupool": {100: 99.4}}


def test_series_colours_follow_first_appearance_and_wrap_around_the_palette() -> None:
    names = [f"p{i}" for i in range(len(PALETTE) + 1)]
    colours = series_colours([*names, "p0"])
    assert list(colours) == names
    assert colours["p0"] == colours[names[-1]] == PALETTE[0]
    assert colours["p1"] == PALETTE[1]


def test_load_curves_draw_each_policy_in_both_panels_in_one_colour() -> None:
    figure = load_curves_figure("openb default (seed 42)", ALLOCATION, FRAGMENTATION)
    traces = figure["data"]
    assert [(t["name"], t["xaxis"], t["yaxis"]) for t in traces] == [
        ("fgd", "x", "y"),
        ("gpupool", "x", "y"),
        ("fgd", "x2", "y2"),
        ("gpupool", "x2", "y2"),
    ]
    assert (traces[1]["x"], traces[1]["y"]) == ([100, 130], [96.0, 96.2])
    assert (traces[2]["x"], traces[2]["y"]) == ([100], [99.6])
    assert [t["showlegend"] for t in traces] == [True, True, False, False]
    colour = {t["name"]: t["line"]["color"] for t in traces[:2]}
    assert {t["name"]: t["line"]["color"] for t in traces[2:]} == colour
    assert colour == {"fgd": PALETTE[0], "gpupool": PALETTE[1]}


def test_load_curves_have_two_titled_panels_on_arrived_demand() -> None:
    layout = load_curves_figure("openb default (seed 42)", ALLOCATION, FRAGMENTATION)["layout"]
    assert layout["title"]["text"] == "openb default (seed 42)"
    assert layout["xaxis"]["domain"] == [0.0, 0.45]
    assert layout["xaxis2"]["domain"] == [0.55, 1.0]
    for axis in ("xaxis", "xaxis2"):
        assert layout[axis]["title"]["text"] == "arrived GPU demand (% of capacity)"
    assert [a["text"] for a in layout["annotations"]] == [
        "GPU allocation ratio (%)",
        "Fragmentation rate (% of idle GPU)",
    ]


def test_wait_boxes_put_every_wait_under_its_tenant_on_a_log_axis() -> None:
    figure = wait_boxes_figure({"fifo": {"t1": [1.0, 2.0], "t2": [3.0]}, "gpupool": {"t1": []}})
    fifo, gpupool = figure["data"]
    assert fifo["type"] == "box"
    assert (fifo["x"], fifo["y"]) == (["t1", "t1", "t2"], [1.0, 2.0, 3.0])
    assert (gpupool["x"], gpupool["y"]) == ([], [])
    assert (fifo["marker"]["color"], gpupool["marker"]["color"]) == PALETTE[:2]
    assert figure["layout"]["yaxis"]["type"] == "log"
    assert figure["layout"]["boxmode"] == "group"


def test_shared_vs_alone_bars_put_the_baseline_first_in_grey() -> None:
    figure = shared_vs_alone_figure(
        ["t1", "t2"], [5.0, None], {"kueue-like": [1.0, 2.0], "gpupool": [0.5, None]}
    )
    alone, kueue, gpupool = figure["data"]
    assert (alone["name"], alone["marker"]["color"]) == ("alone on deserved share", BASELINE_COLOUR)
    assert alone["y"] == [5.0, None]
    assert (kueue["x"], kueue["y"]) == (["t1", "t2"], [1.0, 2.0])
    assert gpupool["y"] == [0.5, None]
    assert (kueue["marker"]["color"], gpupool["marker"]["color"]) == PALETTE[:2]
    assert figure["layout"]["barmode"] == "group"


def test_shared_vs_alone_refuses_values_that_do_not_match_the_tenants() -> None:
    with pytest.raises(ValueError, match="gpupool: 1 values for 2 tenants"):
        shared_vs_alone_figure(["t1", "t2"], [1.0, 2.0], {"gpupool": [1.0]})


def test_every_figure_is_a_valid_plotly_figure() -> None:
    """Plotly accepts each dict as it is: no unknown property anywhere."""
    figures = [
        load_curves_figure("t", ALLOCATION, FRAGMENTATION),
        wait_boxes_figure({"fifo": {"t1": [1.0]}}),
        shared_vs_alone_figure(["t1"], [1.0], {"fifo": [2.0]}),
        allocation_area_figure(["2026-05-04T09:00:00+00:00"], {"nlp · h100": [8.0]}, {}),
        cycle_phases_figure(["09:00:00"], {"plan": [0.2], "apply": [0.1]}),
        preemptions_over_time_figure(["2026-05-04"], {"reclaim": [2]}, {}),
        workload_timeline_figure(
            [("pending", "2026-05-04T09:00:00+00:00", "2026-05-04T09:05:00+00:00")], {}
        ),
    ]
    for figure in figures:
        assert len(go.Figure(figure).data) == len(figure["data"])


def test_pending_reasons_are_bars_most_frequent_on_top_in_the_pages_colours() -> None:
    figure = pending_reasons_figure({"quota": 3, "capacity": 7, "behind": 3})
    (bars,) = figure["data"]
    assert (bars["type"], bars["orientation"]) == ("bar", "h")
    assert bars["y"] == ["capacity", "behind", "quota"]
    assert bars["x"] == [7, 3, 3]
    assert bars["marker"]["color"] == UI["bar"]
    assert figure["layout"]["yaxis"]["autorange"] == "reversed"
    go.Figure(figure)


def test_what_if_waits_compare_each_tenant_today_and_with_the_change_in_hours() -> None:
    waits = {
        "nlp": {"wait_mean_s": {"before": 3600.0, "after": 1800.0, "change": -1800.0}},
        "vision": {"wait_mean_s": {"before": None, "after": 900.0, "change": None}},
    }
    figure = what_if_waits_figure(waits)
    today, proposed = figure["data"]
    assert (today["name"], proposed["name"]) == ("today's quotas", "with the change")
    assert today["x"] == proposed["x"] == ["nlp", "vision"]
    assert today["y"] == [1.0, None] and proposed["y"] == [0.5, 0.25]
    assert figure["layout"]["barmode"] == "group"
    go.Figure(figure)


def test_page_figures_use_the_pages_text_colour_and_background() -> None:
    layout = pending_reasons_figure({"quota": 1})["layout"]
    assert layout["font"]["color"] == UI["text"]
    assert layout["paper_bgcolor"] == layout["plot_bgcolor"] == UI["page"]


def test_the_gpu_heatmap_colours_each_cell_by_its_category_in_steps() -> None:
    colours = {"free": "#eeeeee", "broken": "#111111", "nlp": "#0b5cad"}
    figure = gpu_heatmap_figure(
        ["n1", "n2"],
        [["free", "nlp", "broken", "nlp"], ["nlp", "free"]],
        [["a", "b", "c", "d"], ["e", "f"]],
        colours,
        dim="#dddddd",
    )
    (heatmap,) = figure["data"]
    assert heatmap["y"] == ["n1", "n2"] and heatmap["x"] == [0, 1, 2, 3]
    # each category sits in the middle of its step of the colour scale
    assert heatmap["z"] == [[0.5, 2.5, 1.5, 2.5], [2.5, 0.5, None, None]]
    assert heatmap["text"][1] == ["e", "f", "", ""]
    assert (heatmap["zmin"], heatmap["zmax"]) == (0, 3)
    assert heatmap["colorscale"][4:6] == [[2 / 3, "#0b5cad"], [1.0, "#0b5cad"]]
    assert figure["layout"]["meta"] == {
        "categories": ["free", "broken", "nlp"],
        "colours": ["#eeeeee", "#111111", "#0b5cad"],
        "dim": "#dddddd",
    }
    assert figure["layout"]["yaxis"]["autorange"] == "reversed"
    go.Figure(figure)


def test_allocation_is_a_stacked_area_one_band_per_team_and_flavor() -> None:
    figure = allocation_area_figure(
        ["t0", "t1"],
        {"nlp · h100": [8.0, 4.0], "vision · h100": [0.0, 7.0]},
        {"nlp · h100": "#123456"},
    )
    assert [trace["stackgroup"] for trace in figure["data"]] == ["allocated", "allocated"]
    assert figure["data"][0]["y"] == [8.0, 4.0] and figure["data"][0]["line"]["color"] == "#123456"


def test_cycle_phases_stack_each_cycles_phases_in_one_colour_each() -> None:
    figure = cycle_phases_figure(["a", "b"], {"plan": [0.2, 0.3], "apply": [0.1, 0.0]})
    assert figure["layout"]["barmode"] == "stack"
    assert [trace["name"] for trace in figure["data"]] == ["plan", "apply"]
    assert figure["data"][0]["marker"]["color"] != figure["data"][1]["marker"]["color"]


def test_a_workload_timeline_names_each_state_once_in_its_legend() -> None:
    spans = [("pending", "a", "b"), ("running", "b", "c"), ("pending", "c", "d")]
    figure = workload_timeline_figure(spans, {"pending": "#8a5a00"})
    assert [trace["showlegend"] for trace in figure["data"]] == [True, True, False]
    assert figure["data"][0]["line"]["color"] == "#8a5a00"


def test_preemptions_per_day_stack_by_reason_with_whole_ticks() -> None:
    figure = preemptions_over_time_figure(
        ["d1", "d2"], {"preempt": [1, 0], "reclaim": [2, 7]}, {"reclaim": "#123456"}
    )
    assert figure["layout"]["barmode"] == "stack"
    assert figure["layout"]["yaxis"]["dtick"] == 2  # at most 9 a day
    assert figure["data"][1]["marker"]["color"] == "#123456"


def test_the_pools_allocated_against_active_figure_fills_the_idle_gap() -> None:
    figure = charts.allocated_vs_active_figure(
        ["2026-03-10T10:00:00", "2026-03-10T11:00:00"], [8.0, 6.0], [4.0, 6.0], capacity=16.0
    )

    active, allocated, capacity = figure["data"]
    assert (active["name"], active["y"], active["fill"]) == ("active", [4.0, 6.0], "tozeroy")
    assert (allocated["name"], allocated["y"], allocated["fill"]) == (
        "allocated", [8.0, 6.0], "tonexty")  # fmt: skip
    assert capacity["y"] == [16.0, 16.0]
    assert figure["layout"]["xaxis"]["type"] == "date"


def test_each_team_has_an_allocated_and_a_dotted_active_line_of_one_colour() -> None:
    figure = charts.team_utilization_figure(
        ["2026-03-10T10:00:00"], {"nlp": [8.0], "vision": [2.0]}, {"nlp": [4.0]},
        {"nlp": "#111111", "vision": "#222222"},
    )  # fmt: skip

    names = [(trace["name"], trace["y"], trace["line"]["color"]) for trace in figure["data"]]
    assert names == [
        ("nlp allocated", [8.0], "#111111"),
        ("nlp active", [4.0], "#111111"),
        ("vision allocated", [2.0], "#222222"),
        ("vision active", [0.0], "#222222"),
    ]
    assert [trace["line"].get("dash") for trace in figure["data"]] == [None, "dot", None, "dot"]


def test_a_sparkline_is_the_utilisation_on_a_fixed_0_to_100_scale() -> None:
    figure = charts.sparkline_figure(["2026-03-10T10:00:00", "2026-03-10T10:01:00"], [12.5, 80.0])

    (line,) = figure["data"]
    assert line["y"] == [12.5, 80.0]
    assert figure["layout"]["yaxis"]["range"] == [0, 100]
    assert figure["layout"]["showlegend"] is False
