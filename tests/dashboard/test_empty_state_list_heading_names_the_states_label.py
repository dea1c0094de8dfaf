"""My workloads' empty list, filtered by a state, names that state in its heading as the state
filter and the rows name it (the choice's label, ``views.WORKLOAD_STATE_LABELS``), not by the
value stored (``preempted``): one mapping for the three. WorkloadState's labels read as its
values today, so the test gives the states labels of their own to tell the two apart."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import live, text

from gpupool.dashboard import views
from gpupool.workloads.choices import WorkloadState

LABELS = {value: f"{label.capitalize()} (label)" for value, label in WorkloadState.choices}


@pytest.mark.parametrize("state", ["preempted", "running"])
def test_the_empty_lists_heading_says_the_states_label(
    pool: Any, page_as: Any, monkeypatch: pytest.MonkeyPatch, state: str
) -> None:
    monkeypatch.setattr(views, "WORKLOAD_STATE_LABELS", LABELS)
    client = page_as("max")
    part = text(live(client, f"/workloads/?state={state}"))
    assert f"<h2>No workloads in state “{LABELS[state]}”</h2>" in part
    assert f"“{state}”" not in part
    # The filter names it alike.
    page = text(client.get(f"/workloads/?state={state}"))
    assert f'<option value="{state}" selected>{LABELS[state]}</option>' in page
