"""A month of a busy pool's budget ledger: what a cycle's budget reads cost on it.

    DATABASE_URL=postgres://.../gpupool_x .venv/bin/python manage.py migrate -v0
    DATABASE_URL=postgres://.../gpupool_x .venv/bin/python benchmarks/budget_ledger.py

Grants ``--budgets`` (200) budgets of the current period, then writes ``--entries`` (1,000,000)
spend entries spread over them by ``COPY`` (``gpupool.bulk.insert_values``: the loop's flush
every 300 s makes ~58,000 a day at 200 budgets). Where budgets keep their balance
(``PriorityBudget.balance_gpu_hours``), the raw entries bypass it, so it is filled as the
migration does (timed: the upgrade's one sum of the ledger). Then times, ``--reps`` times each,
median wall and process CPU: ``control.snapshot.read_budgets`` (every cycle) and a cycle's
``do_record_budget_moves`` of one spend per budget (rolled back). Deletes what it wrote at the
end. Runs on any gpupool checkout (the base's code sums the ledger).
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")

import django

django.setup()

from django.apps import apps  # noqa: E402
from django.db import transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from gpupool.bulk import insert_values  # noqa: E402
from gpupool.control.snapshot import read_budgets  # noqa: E402
from gpupool.quotas.actions import BudgetMove, do_grant_budget, do_record_budget_moves  # noqa: E402
from gpupool.quotas.models import BudgetLedgerEntry, PriorityBudget, PriorityClass  # noqa: E402
from gpupool.tenancy.models import Tenant  # noqa: E402


class Rollback(Exception):
    pass


def timed(fn, reps: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    walls, cpus = [], []
    for _ in range(reps):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budgets", type=int, default=200)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    now = timezone.now()
    today = timezone.localdate(now)
    period = {"period_start": today.replace(day=1), "period_end": today + timedelta(days=31)}
    high, _ = PriorityClass.objects.get_or_create(
        name="ledger-bench", defaults={"value": 100, "budget_rate": Decimal(1)}
    )
    tenants = [Tenant.objects.get_or_create(name=f"lb-{i}")[0] for i in range(args.budgets)]
    budgets = [
        do_grant_budget(t, high, gpu_hours=10_000, acting_user=None, **period) for t in tenants
    ]
    ids = [b.pk for b in budgets]
    try:
        start = time.perf_counter()
        with transaction.atomic():
            insert_values(
                BudgetLedgerEntry,
                ("budget_id", "kind", "gpu_hours", "workload_id", "at", "note"),
                (
                    (ids[i % len(ids)], "spend", Decimal("-0.0100"), None, now, "flush")
                    for i in range(args.entries)
                ),
            )
        print(f"entries written: {args.entries} in {time.perf_counter() - start:.1f} s")
        kept = hasattr(PriorityBudget, "balance_gpu_hours")
        if kept:
            migration = importlib.import_module(
                "gpupool.quotas.migrations.0007_prioritybudget_balance"
            )
            w, c = time.perf_counter(), time.process_time()
            with transaction.atomic():
                migration.fill_balances(apps, None)
            print(
                f"migration fill: {(time.perf_counter() - w) * 1000:.0f} ms wall, "
                f"{(time.process_time() - c) * 1000:.0f} ms CPU"
            )
        names = {t.name for t in tenants}
        read = read_budgets(now, names)
        assert (
            len(read) == args.budgets
            and abs(read[0].used - args.entries / args.budgets / 100) < 1e-6
        )
        wall, cpu = timed(lambda: read_budgets(now, names), args.reps)
        print(f"read_budgets: {wall:.1f} ms wall, {cpu:.1f} ms CPU (median of {args.reps})")

        def cycle_moves() -> None:
            moves = [BudgetMove(pk, "spend", Decimal("-0.5"), None, "flush") for pk in ids]
            try:
                with transaction.atomic():
                    do_record_budget_moves(moves, at=now)
                    raise Rollback
            except Rollback:
                pass

        wall, cpu = timed(cycle_moves, args.reps)
        print(f"do_record_budget_moves ({len(ids)} budgets): {wall:.1f} ms wall, {cpu:.1f} ms CPU")
    finally:
        BudgetLedgerEntry.objects.filter(budget_id__in=ids).delete()
        PriorityBudget.objects.filter(pk__in=ids).delete()


if __name__ == "__main__":
    main()
