"""Markdown tables for B3 from `gpupool simulate philly --json` output.

    .venv/bin/python benchmarks/philly_tables.py b3.json

Prints the per-policy table and the per-tenant mean-wait table of `docs/benchmarks.md`: the
same rows as the command's own tables and its HTML report (`gpupool.simulation.report`).
"""

from __future__ import annotations

import json
import sys

from gpupool.simulation.report import markdown_table, queueing_policy_table, queueing_tenant_table


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as handle:
        document = json.load(handle)
    print(markdown_table(queueing_policy_table(document)))
    print()
    print(markdown_table(queueing_tenant_table(document)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
