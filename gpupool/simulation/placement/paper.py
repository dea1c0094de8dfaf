"""The FGD paper's own results (fgd_expected_results/): 10-seed means per trace and policy."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

from gpupool.simulation.datasets import OPENB

# The paper's policy folders, by our policy names (k8s-default and gpupool are not in it).
PAPER_POLICIES = {"random": "01-Random", "bestfit": "05-BestFit", "fgd": "06-FGD"}


def _means(path: Path, columns: tuple[str, ...]) -> dict[tuple[str, str], dict[str, float]]:
    """Mean over seeds of the given columns, keyed by (trace, paper policy)."""
    sums: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: dict.fromkeys(columns, 0.0))
    counts: dict[tuple[str, str], int] = defaultdict(int)
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            key = (row["workload"].removeprefix("openb_pod_list_"), row["sc_policy"])
            counts[key] += 1
            for column in columns:
                sums[key][column] += float(row[column])
    return {key: {c: v / counts[key] for c, v in values.items()} for key, values in sums.items()}


def paper_results(trace: str) -> dict[str, dict[str, dict[str, float]]]:
    """The paper's 10-seed means for one trace, as fractions, in the B2 JSON layout.

    Empty when the results folder is missing or the trace was not in the paper.
    """
    folder = OPENB.directory() / "fgd_expected_results"
    allocation = folder / "analysis_allo_discrete.csv"
    fragmentation = folder / "analysis_frag_ratio_discrete.csv"
    if not allocation.is_file() or not fragmentation.is_file():
        return {}
    alloc = _means(allocation, ("100", "130"))
    frag = _means(fragmentation, ("100",))
    result = {}
    for ours, theirs in PAPER_POLICIES.items():
        key = (trace, theirs)
        if key not in alloc:
            continue
        result[ours] = {
            "allocation_ratio": {
                "1.0": round(alloc[key]["100"] / 100, 5),
                "1.3": round(alloc[key]["130"] / 100, 5),
            },
            "fragmentation_rate": {"1.0": round(frag[key]["100"] / 100, 5)},
        }
    return result
