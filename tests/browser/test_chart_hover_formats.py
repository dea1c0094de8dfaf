"""The charts' hovers write GPUs and GPU-hours as the pages do (``gpupool.number_formats``):
the vendored plotly.js renders the figure builders' hovertemplates in Chromium, and each
number reads as the pages' filters write it (at most 3 places for GPUs, 2 for GPU-hours,
thousands separated, trailing zeros dropped by d3-format's ``~``)."""

from __future__ import annotations

from typing import Any

from gpupool.dashboard import charts
from gpupool.dashboard.finders import PLOTLY_FILE, plotly_package_data
from gpupool.number_formats import GPU_HOURS_PLACES, GPU_PLACES, plain_number

# Values without a tie at the last place kept (a tie may round differently: the pages round
# half to even, the browser's toFixed by the binary value).
GPU_HOURS = [12.5, 12.0, 1234.256, 0.004, 360.1]
GPUS = [0.125, 8.0, 0.5004, 1500.25, 3.1]


def hover_texts(browser: Any, hovertemplate: str, values: list[float]) -> list[str]:
    """What plotly.js shows hovering a one-point trace of each value."""
    page = browser.new_page()
    page.set_content("<div id='chart' style='width:600px;height:400px'></div>")
    page.add_script_tag(path=str(plotly_package_data() / PLOTLY_FILE))
    texts: list[str] = page.evaluate(
        """async ([hovertemplate, values]) => {
          const shown = [];
          for (const y of values) {
            await Plotly.newPlot("chart", [{type: "scatter", x: [0], y: [y], hovertemplate}]);
            Plotly.Fx.hover("chart", [{curveNumber: 0, pointNumber: 0}]);
            shown.push(document.querySelector(".hovertext text.nums").textContent);
          }
          return shown;
        }""",
        [hovertemplate, values],
    )
    page.close()
    return texts


def test_gpu_hour_hovers_read_as_the_pages_write_gpu_hours(browser: Any) -> None:
    figure = charts.cost_trend_figure(["2026-12"], {"nlp": [1.0]}, [1.0], {})
    for trace in figure["data"]:
        shown = hover_texts(browser, trace["hovertemplate"], GPU_HOURS)
        label = trace["hovertemplate"].split(":", 1)[0]
        assert shown == [
            f"{label}: {plain_number(value, GPU_HOURS_PLACES)} GPU-h" for value in GPU_HOURS
        ]


def test_gpu_hovers_read_as_the_pages_write_gpus(browser: Any) -> None:
    figure = charts.allocated_vs_active_figure(["t"], [1.0], [1.0], capacity=1.0)
    for trace in figure["data"]:
        shown = hover_texts(browser, trace["hovertemplate"], GPUS)
        label = trace["hovertemplate"].split(":", 1)[0]
        assert shown == [f"{label}: {plain_number(value, GPU_PLACES)} GPUs" for value in GPUS]
