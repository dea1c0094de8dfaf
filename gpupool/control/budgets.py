"""Priority budgets as the loop spends them (DESIGN section 2, "Priority budget").

A workload running at a class with ``budget_rate > 0`` spends ``rate x GPUs x hours``. Its
protected window is reserved up front when it is admitted (the plan says how much the core
reserved, ``Admission.budget_reservation``: nothing for work it admitted demoted because the
cycle's earlier admissions spent the budget), and settled when the window ends or the workload
leaves: the reservation goes back and what really ran inside the window is spent. After the
window, spending accrues with time. An elastic gang that shrinks (a member pod gone, its
minimum kept) is charged for the GPUs it still holds from the shrink on (``shrink``); one
that grows (``Plan.grow``) for all the GPUs it holds from the growth on (``grow``), its
protected window's reservation never extended (the core reserves nothing for growth).

Writing a ledger entry every cycle for every such workload would flood the ledger; instead the
loop keeps, per workload, until when it was charged (``Charge``), and the snapshot's ``used``
of each budget is the ledger's plus what running work accrued since its last charge. So a
budget runs out *mid-run*: when the accrued spending reaches what is left, the loop writes the
spends (never past the grant), the core sees nothing left and treats the work as the default
class -- demoted, not evicted; from then on it may be preempted like any default-class work,
and it spends nothing until the budget is topped up. Accrued spending is also written every
``FLUSH_S`` seconds, so the ledger lags the truth by at most that.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from functools import cache
from operator import attrgetter
from typing import TYPE_CHECKING

from django.db import connection
from django.db.models import F, Max, Q, Sum
from django.utils import timezone

from gpupool.control.snapshot import DatabaseSnapshot, WorkloadRow
from gpupool.quotas.actions import BudgetMove
from gpupool.quotas.choices import LedgerEntryKind
from gpupool.quotas.models import BudgetLedgerEntry, PriorityBudget, PriorityClass
from gpupool.scheduler.contracts import gpu_count
from gpupool.scheduler.types import (
    MILLI,
    SECONDS_PER_HOUR,
    BudgetInfo,
    Snapshot,
    WorkloadInfo,
)
from gpupool.tenancy.models import Tenant

if TYPE_CHECKING:
    from gpupool.control.sync import Shrink

FLUSH_S = 300.0
_NAME_OF = attrgetter("name")
# The note of a budget's flushed spending (one entry for all its running work, no workload).
FLUSHED_NOTE = "ran at the class"
# The note of a shrunk gang's moves (``BudgetBook.shrink``).
SHRUNK_NOTE = "gang shrank"
# The note of a grown gang's moves (``BudgetBook.grow``).
GREW_NOTE = "gang grew"
Key = tuple[str, str]  # (tenant, priority class)


@dataclass(frozen=True, slots=True)
class Charge:
    """A placed workload at a budgeted class: what it reserved and until when it was charged."""

    workload_id: int
    key: Key
    rate: float
    gpus: float
    start: float
    window_end: float
    reserved: float
    charged_until: float

    def accrued(self, now: float, flushed: float = 0.0) -> float:
        """GPU-hours of budget run since the last charge, outside the reserved window;
        ``flushed``: when its budget's running work was last charged all together
        (``BudgetBook.flushed``)."""
        since = max(self.charged_until, self.window_end, flushed)
        return max(now - since, 0.0) / SECONDS_PER_HOUR * self.gpus * self.rate


def window_at_stake(workload: WorkloadInfo, cap: float | None, now: float) -> bool:
    """Whether running work's protection depends on having paid for its window: it is still
    inside the window it declares, and that window is longer than its queue's ``cap``
    (``max_protected_runtime_s``) -- the work whose ``window_reserved`` the core must be told."""
    started = workload.started_at
    return (
        workload.state == "running"
        and started is not None
        and started + workload.protected_runtime_s > now
        and cap is not None
        and workload.protected_runtime_s > cap
    )


def reserved_windows(database: DatabaseSnapshot) -> DatabaseSnapshot:
    """The snapshot with ``window_reserved`` on running work at a class that costs budget
    whose window is at stake (``window_at_stake``), from the ledger: a reservation for it
    since its admission (the loop keeps the same from its ``BudgetBook``,
    ``ControlLoop._overlay``). For the pages' snapshot, so that their dry-run protects what
    the loop's next cycle protects."""
    snapshot, now = database.snapshot, database.now
    rates = {c.name: c.budget_rate for c in snapshot.priority_classes}
    caps = {q.name: q.max_protected_runtime_s for q in snapshot.queues}
    open_work = {
        database.workload_ids[w.name]: w
        for w in snapshot.workloads
        if rates.get(w.priority_class, 0) > 0 and window_at_stake(w, caps.get(w.queue), now)
    }
    if not open_work:
        return database
    # A reservation of this run: made at its admission or later -- or, for a first run
    # admitted at its very submission (a submission stamped after the admitting cycle's
    # moment: ``actions._late_admissions``), any, since no earlier run made one.
    reserved = set(
        BudgetLedgerEntry.objects.filter(
            Q(at__gte=F("workload__admitted_at"))
            | Q(workload__admitted_at=F("workload__submitted_at")),
            kind=LedgerEntryKind.RESERVE,
            workload_id__in=list(open_work),
        ).values_list("workload_id", flat=True)
    )
    changed = {w.name: replace(w, window_reserved=pk in reserved) for pk, w in open_work.items()}
    workloads = tuple(changed.get(w.name, w) for w in snapshot.workloads)
    return replace(
        database,
        snapshot=replace(snapshot, workloads=workloads),
        by_name={**database.by_name, **changed},
    )


def held_gpus(workload: WorkloadInfo) -> float:
    """GPUs the workload holds (shared GPUs count their fraction)."""
    return sum(p.milli / MILLI if p.milli is not None else len(p.gpus) for p in workload.placement)


class BudgetBook:
    """The loop's charges, and the ledger movements they turn into."""

    def __init__(self) -> None:
        self.charges: dict[int, Charge] = {}
        # When each budget's running work was last charged, all of it at once (``spend``):
        # a charge is charged up to the later of this and its own ``charged_until``.
        self.flushed: dict[Key, float] = {}
        self.last_flush: float | None = None

    def accrued(self, charge: Charge, now: float) -> float:
        """What ``charge`` accrued since it was last charged, its budget's flushes counted."""
        return charge.accrued(now, self.flushed.get(charge.key, 0.0))

    # -- from the database -----------------------------------------------------------------

    def load(self, rows: Iterable[WorkloadRow], snapshot: Snapshot) -> None:
        """Charges of the placed workloads at budgeted classes, from the ledger's entries: as
        the loop that wrote them held them. A window's reservation is what the ledger still
        holds for the workload, over the GPUs it holds now; it began when the workload
        started, or at its last growth inside the window (``grow`` began a window of the GPUs
        held then: its entry settling what ran before, ``GREW_NOTE``) -- a shrink changes
        the GPUs and the reservation alike, never the window's start or end."""
        rates = {c.name: c.budget_rate for c in snapshot.priority_classes}
        tenants = {q.name: q.tenant for q in snapshot.queues}
        placed = {
            row.id: row
            for row in rows
            if row.info.state == "running" and rates.get(row.info.priority_class, 0) > 0
        }
        if not placed:
            self.charges, self.flushed = {}, {}
            return
        entries = (
            BudgetLedgerEntry.objects.filter(workload_id__in=list(placed))
            .values("workload_id")
            .annotate(
                held=Sum(
                    "gpu_hours",
                    filter=Q(kind__in=[LedgerEntryKind.RESERVE, LedgerEntryKind.SETTLE]),
                ),
                spent_at=Max("at", filter=Q(kind=LedgerEntryKind.SPEND)),
                # A growth inside the window settled what ran in it and began the window of
                # the GPUs it holds then (``grow``); a shrink keeps the window's start.
                grew_at=Max("at", filter=Q(kind=LedgerEntryKind.SETTLE, note=GREW_NOTE)),
            )
        )
        ledger = {e["workload_id"]: e for e in entries}
        # A flush charged every running workload of its budget up to its time (``spend``).
        flushed: dict[Key, float] = {
            (tenant, priority_class): at.timestamp()
            for tenant, priority_class, at in BudgetLedgerEntry.objects.filter(
                kind=LedgerEntryKind.SPEND, workload=None
            )
            .values_list("budget__tenant__name", "budget__priority_class__name")
            .annotate(at=Max("at"))
            .values_list("budget__tenant__name", "budget__priority_class__name", "at")
        }
        charges: dict[int, Charge] = {}
        for pk, row in placed.items():
            info = row.info
            start = info.started_at or 0.0
            found = ledger.get(pk, {})
            grew_at = found.get("grew_at")
            if grew_at is not None:  # (one of an earlier run began before this one started)
                start = max(start, grew_at.timestamp())
            reserved = -float(found.get("held") or 0.0)
            rate = rates[info.priority_class]
            gpus = held_gpus(info)
            window = reserved / (rate * gpus) * SECONDS_PER_HOUR if reserved > 0 and gpus else 0.0
            spent_at = found.get("spent_at")
            key = (tenants.get(info.queue) or "", info.priority_class)
            charges[pk] = Charge(
                workload_id=pk,
                key=key,
                rate=rate,
                gpus=gpus,
                start=start,
                window_end=start + window,
                reserved=reserved,
                charged_until=max(start, spent_at.timestamp() if spent_at else start),
            )
        self.charges, self.flushed = charges, flushed

    # -- each cycle ------------------------------------------------------------------------

    def with_accrual(
        self, budgets: tuple[BudgetInfo, ...], now: float
    ) -> tuple[tuple[BudgetInfo, ...], list[tuple[Charge, float]]]:
        """The budgets with what running work accrued since its last charge, and the spends
        to write now: all accruals of a budget that they exhaust (capped at what was left),
        and every accrual once ``FLUSH_S`` has passed since the last flush."""
        by_key: dict[Key, list[tuple[Charge, float]]] = defaultdict(list)
        flushed = self.flushed
        for charge in self.charges.values():
            amount = charge.accrued(now, flushed.get(charge.key, 0.0))
            if amount > 0:
                by_key[charge.key].append((charge, amount))
        # A cycle that plans again (after an apply handed on taught it something) asks
        # again at the same moment: the same flush, not one skipped until ``FLUSH_S`` later.
        last = self.last_flush
        flush = last is None or last == now or now - last >= FLUSH_S
        if flush:
            self.last_flush = now
        spends: list[tuple[Charge, float]] = []
        result: list[BudgetInfo] = []
        for budget in budgets:
            accrued = by_key.pop((budget.tenant, budget.priority_class), [])
            total = sum(amount for _, amount in accrued)
            left = max(budget.remaining, 0.0)
            if total >= left:  # exhausted: spend what is left, the rest never ran elevated
                scale = left / total if total else 0.0
                spends.extend((charge, amount * scale) for charge, amount in accrued)
                result.append(replace(budget, used=budget.gpu_hours))
                continue
            if flush:
                spends.extend(accrued)
            result.append(replace(budget, used=budget.used + total))
        for accrued in by_key.values():  # no budget this period: nothing to spend from
            spends.extend((charge, 0.0) for charge, _ in accrued)
        return tuple(result), spends

    def spend(self, spends: Iterable[tuple[Charge, float]], now: float) -> list[BudgetMove]:
        """Ledger spends for accruals: **one entry per budget** for all its running work (no
        workload: ``FLUSHED_NOTE``), not one per workload -- a flush at B1's size was
        thousands of rows a cycle. Every accrual of a budget is in its flush
        (``with_accrual``), so its running work is charged up to ``now`` by the budget
        (``flushed``), not charge by charge, and the entry's time is where each of them was
        charged up to (``load`` reads it back so). A charge is never set back behind it: a
        window settled later in the same cycle keeps the flush (``_settle``)."""
        spends = list(spends)
        keys = {charge.key for charge, _ in spends}
        for key in keys:
            self.flushed[key] = now
        ids = budget_ids(keys, now)
        totals: dict[int, float] = defaultdict(float)
        counts: dict[int, int] = defaultdict(int)
        for charge, amount in spends:
            budget = ids.get(charge.key)
            if budget is not None and amount > 0:
                totals[budget] += amount
                counts[budget] += 1
        moves: list[BudgetMove] = []
        for budget, amount in sorted(totals.items()):
            hours = _hours(amount)
            if hours > 0:
                moves.append(
                    BudgetMove(
                        budget,
                        LedgerEntryKind.SPEND,
                        -hours,
                        None,
                        f"{FLUSHED_NOTE}: {counts[budget]} running workloads",
                    )
                )
        return moves

    def settle_due(self, now: float) -> list[BudgetMove]:
        """Windows that ended: the reservation back, what ran inside the window spent."""
        due = [c for c in self.charges.values() if c.reserved > 0 and c.window_end <= now]
        return self._settle(due, now, leaving=False)

    def admit(
        self,
        admitted: Iterable[tuple[int, WorkloadInfo, float]],
        snapshot: Snapshot,
        now: float,
    ) -> list[BudgetMove]:
        """Charges of newly admitted workloads at budgeted classes, and the reservations of
        their protected windows: ``admitted`` is (id, the workload as admitted, what the core
        reserved for it: ``Admission.budget_reservation``). The core spends the budget as it
        admits within a cycle and demotes work it no longer covers (``Cycle.spend_budget``,
        ``Cycle.demote``), so the ledger reserves exactly what the plan says it reserved --
        never a standing derived again from the snapshot, which would find every admission
        covered on its own and reserve for all of them. An elastic gang admitted with fewer
        pods than it asks reserves for the GPUs it holds."""
        rates = {c.name: c.budget_rate for c in snapshot.priority_classes}
        budgeted = [(pk, w, r) for pk, w, r in admitted if rates.get(w.priority_class, 0) > 0]
        if not budgeted:
            return []
        tenants = {q.name: q.tenant for q in snapshot.queues}
        keys = {(tenants.get(w.queue) or "", w.priority_class) for _, w, r in budgeted if r > 0}
        ids = budget_ids(keys, now)
        moves: list[BudgetMove] = []
        for pk, workload, reservation in budgeted:
            key = (tenants.get(workload.queue) or "", workload.priority_class)
            rate = rates[workload.priority_class]
            gpus = held_gpus(workload)
            asked = gpu_count(workload)
            reserved = reservation * gpus / asked if reservation > 0 and asked else 0.0
            window = reserved / (rate * gpus) * SECONDS_PER_HOUR if reserved and gpus else 0.0
            self.charges[pk] = Charge(pk, key, rate, gpus, now, now + window, reserved, now)
            if reserved > 0 and key in ids:
                moves.append(
                    BudgetMove(
                        ids[key], LedgerEntryKind.RESERVE, -_hours(reserved), pk, "protected window"
                    )
                )
        return moves

    def leave(self, workload_ids: Iterable[int], now: float) -> list[BudgetMove]:
        """Workloads that stopped holding GPUs: settle, and spend what they accrued."""
        leaving = [self.charges.pop(pk) for pk in workload_ids if pk in self.charges]
        moves = self._settle([c for c in leaving if c.reserved > 0], now, leaving=True)
        ids = budget_ids({c.key for c in leaving}, now)
        for charge in leaving:
            amount = self.accrued(charge, now)
            if amount > 0 and charge.key in ids:
                moves.append(
                    BudgetMove(
                        ids[charge.key],
                        LedgerEntryKind.SPEND,
                        -_hours(amount),
                        charge.workload_id,
                        "ran at the class",
                    )
                )
        return moves

    def shrink(
        self, shrinks: Iterable[Shrink], rows: Mapping[str, WorkloadRow], now: float
    ) -> list[BudgetMove]:
        """Elastic gangs that go on with fewer pods (``sync.Shrink``, written with these
        moves): from ``now`` each is charged for the GPUs it still holds. What it ran until
        now at the GPUs it held is spent (after its window, the accrual; inside it, the gone
        pods' share of what ran in the window), and a window not over yet keeps the
        reservation of the GPUs left, the rest settled back -- so the window, settled when it
        ends, spends what the GPUs left ran in it, and ``load`` reads the same window back
        from the ledger. ``rows``: the state's rows as the sync saw them (before the shrink).
        Only the shrunk workloads at budgeted classes are touched."""
        changed: list[tuple[Charge, float]] = []
        for shrink in shrinks:
            charge = self.charges.get(shrink.workload_id)
            row = rows.get(shrink.name)
            if charge is None or row is None:
                continue
            gpus = kept_gpus(row, shrink.keep)
            if 0 < gpus < charge.gpus:
                changed.append((charge, gpus))
        if not changed:
            return []
        ids = budget_ids({charge.key for charge, _ in changed}, now)
        moves: list[BudgetMove] = []
        for charge, gpus in changed:
            budget = ids.get(charge.key)
            gone = charge.gpus - gpus
            spent = self.accrued(charge, now)  # after its window, at the GPUs it held
            reserved = charge.reserved
            if reserved > 0 and charge.window_end > now:
                reserved = charge.reserved * gpus / charge.gpus
                ran = max(now - charge.start, 0.0) / SECONDS_PER_HOUR
                spent += min(ran * gone * charge.rate, charge.reserved - reserved)
                back = _hours(charge.reserved) - _hours(reserved)
                if budget is not None and back > 0:
                    moves.append(
                        BudgetMove(
                            budget, LedgerEntryKind.SETTLE, back, charge.workload_id, SHRUNK_NOTE
                        )
                    )
            if budget is not None and _hours(spent) > 0:
                moves.append(
                    BudgetMove(
                        budget,
                        LedgerEntryKind.SPEND,
                        -_hours(spent),
                        charge.workload_id,
                        SHRUNK_NOTE,
                    )
                )
            self.charges[charge.workload_id] = replace(
                charge, gpus=gpus, reserved=reserved, charged_until=max(charge.charged_until, now)
            )
        return moves

    def grow(self, grown: Iterable[tuple[int, float]], now: float) -> list[BudgetMove]:
        """Elastic gangs that add pods (``Plan.grow``, written with these moves: ``grown`` is
        (id, the GPUs each holds with them)): from ``now`` each is charged for all the GPUs
        it holds -- the inverse of ``shrink``. What it ran until now at the GPUs it held is
        spent: after its window, the accrual; inside a window not over yet, what ran in it
        (its share of the reservation settled back and spent), and the rest of the
        reservation, never extended, is the window of the GPUs it holds now, from now on
        (ending sooner: as many GPU-hours over more GPUs). Only workloads at budgeted
        classes (those with a charge) are touched."""
        changed = [
            (charge, gpus)
            for pk, gpus in grown
            if (charge := self.charges.get(pk)) is not None and gpus > charge.gpus
        ]
        if not changed:
            return []
        ids = budget_ids({charge.key for charge, _ in changed}, now)
        moves: list[BudgetMove] = []
        for charge, gpus in changed:
            budget = ids.get(charge.key)
            spent = self.accrued(charge, now)  # after its window, at the GPUs it held
            start, reserved, window_end = charge.start, charge.reserved, charge.window_end
            if reserved > 0 and window_end > now:
                ran = min(max(now - start, 0.0) / SECONDS_PER_HOUR * charge.gpus * charge.rate,
                          reserved)  # fmt: skip
                back = _hours(reserved) - _hours(reserved - ran)
                if budget is not None and back > 0:
                    moves.append(
                        BudgetMove(
                            budget, LedgerEntryKind.SETTLE, back, charge.workload_id, GREW_NOTE
                        )
                    )
                spent += ran
                reserved -= ran
                start = now
                window_end = now + reserved / (charge.rate * gpus) * SECONDS_PER_HOUR
            if budget is not None and _hours(spent) > 0:
                moves.append(
                    BudgetMove(
                        budget, LedgerEntryKind.SPEND, -_hours(spent), charge.workload_id, GREW_NOTE
                    )
                )
            self.charges[charge.workload_id] = replace(
                charge,
                gpus=gpus,
                start=start,
                window_end=window_end,
                reserved=reserved,
                charged_until=max(charge.charged_until, now),
            )
        return moves

    def _settle(self, charges: list[Charge], now: float, *, leaving: bool) -> list[BudgetMove]:
        ids = budget_ids({c.key for c in charges}, now)
        moves: list[BudgetMove] = []
        for charge in charges:
            budget = ids.get(charge.key)
            ran = max(min(now, charge.window_end) - charge.start, 0.0)
            used = min(ran / SECONDS_PER_HOUR * charge.gpus * charge.rate, charge.reserved)
            if budget is not None:
                moves.append(
                    BudgetMove(
                        budget,
                        LedgerEntryKind.SETTLE,
                        _hours(charge.reserved),
                        charge.workload_id,
                        "window settled",
                    )
                )
                if used > 0:
                    moves.append(
                        BudgetMove(
                            budget,
                            LedgerEntryKind.SPEND,
                            -_hours(used),
                            charge.workload_id,
                            "ran in its window",
                        )
                    )
            if not leaving:  # from here on it accrues from its window's end, or a later spend
                self.charges[charge.workload_id] = replace(
                    charge, reserved=0.0, charged_until=max(charge.charged_until, charge.window_end)
                )
        return moves


def kept_gpus(row: WorkloadRow, keep: Iterable[tuple[int, int, int]]) -> float:
    """The GPUs a shrunk gang still holds: those of the placements ``keep`` names (as
    ``Shrink.keep``: pod set id, pod index, ...), found in ``row``'s placements as the
    snapshot orders them (by pod set, then pod index; ``snapshot._placement``)."""
    info = row.info
    first: dict[int, int] = {}  # pod set id -> the position of its first pod
    position = 0
    for pod_set_id, pod_set in zip(row.pod_set_ids, info.pod_sets, strict=False):
        first[pod_set_id] = position
        position += pod_set.count
    placement = info.placement
    held = 0.0
    for pod_set_id, index, _ in keep:
        at = first.get(pod_set_id)
        if at is not None and at + index < len(placement):
            placed = placement[at + index]
            held += placed.milli / MILLI if placed.milli is not None else len(placed.gpus)
    return held


def _hours(amount: float) -> Decimal:
    return Decimal(str(round(amount, 4)))


def budget_ids(keys: Iterable[Key], now: float) -> dict[Key, int]:
    """The budget row of each (tenant, class) for the period containing ``now``."""
    wanted = set(keys)
    if not wanted:
        return {}
    today = timezone.localdate(datetime.fromtimestamp(now, tz=timezone.get_current_timezone()))
    # The period's budgets, the wanted ones picked here (a flush wants every budget of the
    # period), by one statement of its own: a cycle asks three or four times, and Django's
    # compiling of the query was most of each ask. Ordered as the model orders them, so that
    # the last of two periods that still both cover today wins, as before.
    with connection.cursor() as cursor:
        cursor.execute(_budget_ids_sql(), [today, today])
        rows = cursor.fetchall()
    return {(t, c): pk for t, c, pk in rows if (t, c) in wanted}


# Above this share of the workloads named, one pass is cheaper than a bisection per name
# (about 15 steps each, at B1's 30,000 workloads).
_BISECTED_SHARE = 1 / 30


def named(workloads: Sequence[WorkloadInfo], names: Collection[str]) -> list[WorkloadInfo]:
    """The workloads of ``workloads`` named in ``names``, in their order: by bisection where
    they are in name order (the loop's snapshots are: ``LoopState.snapshot``) and few are
    named, by one pass otherwise (or when a name is not there)."""
    if len(names) > len(workloads) * _BISECTED_SHARE:
        return [w for w in workloads if w.name in names]
    found: list[int] = []
    for name in names:
        index = bisect_left(workloads, name, key=_NAME_OF)
        if index == len(workloads) or workloads[index].name != name:
            return [w for w in workloads if w.name in names]
        found.append(index)
    return [workloads[index] for index in sorted(found)]


def budgets_by_key(budgets: Iterable[BudgetInfo]) -> Mapping[Key, BudgetInfo]:
    """The snapshot's budgets by (tenant, class)."""
    return {(b.tenant, b.priority_class): b for b in budgets}


@cache
def _budget_ids_sql() -> str:
    quote = connection.ops.quote_name
    budget = quote(PriorityBudget._meta.db_table)
    tenant = quote(Tenant._meta.db_table)
    klass = quote(PriorityClass._meta.db_table)
    return (
        f"SELECT t.name, c.name, b.id FROM {budget} b "  # noqa: S608
        f"JOIN {tenant} t ON t.id = b.tenant_id JOIN {klass} c ON c.id = b.priority_class_id "
        "WHERE b.period_start <= %s AND b.period_end > %s "
        "ORDER BY t.name, c.name, b.period_start DESC"
    )
