"""Markdown tables for B3 from `gpupool simulate philly --json` output.

    .venv/bin/python benchmarks/philly_tables.py b3.json

Prints the per-policy table and the per-tenant mean-wait table of `docs/benchmarks.md`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from gpupool.simulation.queueing.metrics import describe_ratio, describe_worse_than_alone

HOUR = 3600.0


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / HOUR:.2f}"


def policy_table(doc: dict[str, Any]) -> list[str]:
    """One row per policy: JCT, wait, utilisation, preemptions, loss, share deviation, sharing
    incentive, finish-time fairness (the worst tenant's mean JCT shared / alone)."""
    rows = [
        "| policy | JCT mean | JCT p99 | wait mean | wait p99 | utilisation | preemptions "
        "| GPU-h lost | share deviation | tenants worse than alone | worst JCT / alone |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in doc["policies"].items():
        verdict = describe_worse_than_alone(m.get("tenants_worse_than_alone"))
        rows.append(
            f"| {name} | {m['jct_mean_s'] / HOUR:.2f} h | {m['jct_p99_s'] / HOUR:.1f} h "
            f"| {m['wait_mean_s'] / HOUR:.2f} h | {m['wait_p99_s'] / HOUR:.2f} h "
            f"| {100 * m['utilisation']:.1f}% | {m['preemptions']} "
            f"| {m['gpu_hours_lost']:.1f} ({100 * m['gpu_hours_lost_fraction']:.3f}%) "
            f"| {100 * m['share_deviation']:.2f}% | {verdict} "
            f"| {describe_ratio(m.get('finish_time_fairness_max'))} |"
        )
    return rows


def tenant_table(doc: dict[str, Any]) -> list[str]:
    """Per tenant: deserved, jobs, GPU-hours, mean wait alone and under each policy (hours)."""
    names = list(doc["policies"])
    first = doc["policies"][names[0]]["tenants"]
    rows = [
        "| tenant | deserved GPUs | jobs | GPU-h | alone | "
        + " | ".join(names)
        + " | "
        + " | ".join(f"p99 {n}" for n in names)
        + " |",
        "|---|---|---|---|---|" + "---|" * (2 * len(names)),
    ]
    for tenant in sorted(first):
        base = first[tenant]
        cells = [
            tenant,
            str(base["deserved_gpus"]),
            str(base["jobs"]),
            f"{base['gpu_hours']:,.0f}",
            _hours(base.get("alone_wait_mean_s")),
        ]
        cells += [_hours(doc["policies"][n]["tenants"][tenant]["wait_mean_s"]) for n in names]
        cells += [
            f"{doc['policies'][n]['tenants'][tenant]['wait_p99_s'] / HOUR:.1f}" for n in names
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        doc = json.load(handle)
    print("\n".join(policy_table(doc)))
    print()
    print("\n".join(tenant_table(doc)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
