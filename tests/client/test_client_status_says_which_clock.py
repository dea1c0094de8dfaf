"""``gpupool status`` gives the last cycle's time on the pool's clock (its ``cluster_at``); a
cycle that read no cluster time has only the wall clock's ``finished_at``, and the line says
so, as the Overview labels such a cycle's time, instead of calling it the pool's clock."""

from __future__ import annotations

import argparse
import io
from typing import Any

import pytest

from gpupool.client.http import Listing
from gpupool.client.main import do_status

CYCLE = {
    "finished_at": "2026-12-07T10:00:05Z",
    "duration_s": 0.5,
    "admitted": 1,
    "evicted": 0,
    "pending": 2,
}


class OneCycle:
    """The API as ``do_status`` calls it: no workloads, and ``cycle`` as the latest."""

    def __init__(self, cycle: dict[str, Any]) -> None:
        self.cycle = cycle

    def every(self, path: str, query: dict[str, Any] | None = None) -> Listing:
        assert path == "workloads/"
        return Listing([], 0, False)

    def call(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        assert (method, path) == ("GET", "scheduling-cycles/latest/")
        return self.cycle


@pytest.mark.parametrize(
    ("cluster_at", "said"),
    [
        ("2026-12-07T15:00:00Z", "Last scheduling cycle: 2026-12-07 15:00 UTC (the pool's clock)"),
        (None, "Last scheduling cycle: 2026-12-07 10:00 UTC (wall clock: it read no cluster time)"),
    ],
)
def test_status_names_the_clock_of_the_last_cycles_time(cluster_at: str | None, said: str) -> None:
    out = io.StringIO()
    options = argparse.Namespace(
        state=None, all=False, queue=None, namespace=None, json=False, err=io.StringIO()
    )
    assert do_status(OneCycle(CYCLE | {"cluster_at": cluster_at}), options, out) == 0  # type: ignore[arg-type]
    assert said + ", 0.50 s, 1 admitted, 0 evicted, 2 pending." in out.getvalue()
