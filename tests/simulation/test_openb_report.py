"""The B2 report: one page, plotly.js inlined, each policy one colour in both panels."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.simulation.placement.experiment import run_openb
from gpupool.simulation.report import placement_figure, write_placement_report


@pytest.mark.usefixtures("sample_data")
def test_report_colours_each_policy_alike_in_both_panels(tmp_path: Path) -> None:
    """Allocation and fragmentation lines of a policy share its colour, so one legend serves."""
    [run] = run_openb(["default"], ["bestfit", "gpupool"], [42])
    figure = placement_figure(run)
    colours: dict[str, set[str]] = {}
    for trace in figure["data"]:
        colours.setdefault(trace["name"], set()).add(trace["line"]["color"])
    assert set(colours) == {"bestfit", "gpupool"}
    assert all(len(c) == 1 for c in colours.values())
    assert colours["bestfit"] != colours["gpupool"]
    assert "(seed 42)" in figure["layout"]["title"]["text"]

    path = tmp_path / "b2.html"
    write_placement_report([run], path)
    page = path.read_text(encoding="utf-8")
    assert "plotly" in page.lower() and "<h2>default</h2>" in page
    assert page.count("<tr><td>") == 2
