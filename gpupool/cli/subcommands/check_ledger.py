"""``gpupool check-ledger``: every budget's kept balance against the sum of its ledger.

A budget keeps its balance on its row (``PriorityBudget.balance_gpu_hours``), moved with each
ledger entry written, so that the scheduling loop does not sum the ledger every cycle. The
ledger stays the source of truth: this sums it once and lists each budget whose kept balance
differs (exit status 1), or says they all agree (0). It reads only.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from gpupool.quotas.queries import ledger_mismatches

HELP = "Compare each budget's kept balance with the sum of its ledger (exit 1 on a mismatch)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No arguments."""


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """List the mismatches; 1 when there is one."""
    mismatches = ledger_mismatches()
    for budget, ledger in mismatches:
        stdout.write(
            f"budget {budget.pk} ({budget}): kept {budget.balance_gpu_hours:f}, ledger {ledger:f}\n"
        )
    if mismatches:
        stderr.write(f"{len(mismatches)} budgets' kept balance differs from their ledger\n")
        return 1
    stdout.write("every budget's kept balance equals its ledger's sum\n")
    return 0
