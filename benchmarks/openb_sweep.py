"""Format B2 results (JSON from `manage.py gpupool simulate openb --json`) as markdown tables.

    python manage.py gpupool simulate openb --trace paper --seeds 42-51 --json > b2.json
    python benchmarks/openb_sweep.py b2.json

Prints one row per trace: ours vs the paper's 10-seed means for random, bestfit and fgd, then
k8s-default and gpupool, allocation ratio at 130% arrived load (and gpupool - fgd).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

TABLE_ORDER = ("random", "bestfit", "fgd", "k8s-default", "gpupool")


def rows(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-trace objects of one CLI output (one trace, or several under "runs")."""
    runs: list[dict[str, Any]] = document.get("runs", [document])
    return runs


def percent(value: float | None) -> str:
    """A fraction as a percentage with two decimals."""
    return "-" if value is None else f"{100 * value:.2f}"


def table(runs: list[dict[str, Any]]) -> str:
    """Markdown table of allocation at 130% arrived load, ours / paper."""
    header = "| trace | seeds | random | bestfit | fgd | k8s-default | gpupool | gpupool - fgd |"
    lines = [header, "|" + "---|" * 8]
    for run in runs:
        seeds = run["seed"] if isinstance(run["seed"], list) else [run["seed"]]
        cells = []
        ours: dict[str, float | None] = {}
        for name in TABLE_ORDER:
            entry = run["policies"].get(name)
            value = None if entry is None else entry["allocation_ratio"]["1.3"]
            ours[name] = value
            paper = run.get("paper", {}).get(name, {}).get("allocation_ratio", {}).get("1.3")
            cells.append(percent(value) + ("" if paper is None else f" / {percent(paper)}"))
        gpupool, fgd = ours["gpupool"], ours["fgd"]
        diff = "-" if gpupool is None or fgd is None else f"{100 * (gpupool - fgd):+.2f}"
        span = f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
        lines.append(f"| {run['trace']} | {span} | " + " | ".join(cells) + f" | {diff} |")
    return "\n".join(lines)


def main(paths: list[str]) -> None:
    """Print the table for the given JSON files."""
    runs = [run for path in paths for run in rows(json.loads(Path(path).read_text()))]
    print(table(runs))


if __name__ == "__main__":
    main(sys.argv[1:])
