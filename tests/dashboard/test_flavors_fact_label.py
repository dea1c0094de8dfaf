"""The core names every flavor a never-fitting workload may use (fact ``flavors``:
``scheduler.explain.across_flavors``); the pages label it like every other fact."""

from __future__ import annotations

from gpupool.dashboard.facts import fact_rows


def test_the_pages_label_the_flavors_fact() -> None:
    (row,) = fact_rows({"flavors": ["h100", "gb200"]})
    assert (row.label, row.value) == ("flavors it may use", "h100, gb200")
