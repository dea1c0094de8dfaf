"""What approving a quota or budget request would do, shown to the admin before deciding.

``request_impact(request)`` answers three questions, each from the one place that knows it:

- **does it fit?** ``quotas.actions.quota_request_problems``: the rules approval enforces
  (guarantees inside their ancestors' and the pool's healthy capacity, levels in order,
  budget periods), with the numbers they are checked against;
- **whose deserved share moves, and by how much?** ``quotas.shares``: every queue's share of
  the flavor before and after, from the pool as the control loop's snapshot builder reads it;
  none for a request that cannot be approved as it stands (``deserved_shares_error`` says
  so, and why), whose "after" would be a tree approval refuses;
- **what would recent history have looked like?** the latest what-if run kept with the
  request (``quotas.whatif``), if one was started.

A request no longer open (``choices.CLOSED_STATES``: applied, rejected, withdrawn) is not
approved again: its impact says what became of it (``closed_as``), the amounts as they are now,
and no "after", no fit and no share change (an applied budget request's hours are in the grant
already; a rejected one's change was never made).

The pool's shape (queues, quotas, healthy GPUs) comes from ``control.snapshot.build_pool``,
the loop's reader without the workloads, and is cached per finished scheduling cycle, so the
pages and the API share one read per cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

from django.core.cache import cache

from gpupool.control.models import SchedulingCycle
from gpupool.control.snapshot import SnapshotError, build_pool
from gpupool.inventory.models import healthy_capacity
from gpupool.inventory.units import GPU_UNIT, flavor_unit
from gpupool.quotas.actions import quota_request_problems
from gpupool.quotas.choices import CLOSED_STATES, QuotaRequestKind, QuotaRequestState
from gpupool.quotas.models import PriorityBudget, QueueQuota, QuotaRequest, pool_guarantees
from gpupool.quotas.shares import (
    ParentCap,
    PoolShape,
    ShareChange,
    capped_by_parent,
    deserved_shares,
    pool_shape,
    share_changes,
)

POOL_SHAPE_CACHE_S = 3600
T = TypeVar("T")


def _per_cycle(name: str, build: Callable[[], T]) -> T:
    """``build()``, cached under the last finished scheduling cycle's id; built afresh
    while no cycle has finished."""
    cycle_id = (
        SchedulingCycle.objects.filter(finished_at__isnull=False)
        .order_by("-finished_at", "-id")
        .values_list("id", flat=True)
        .first()
    )
    if cycle_id is None:
        return build()
    key = f"gpupool:{name}:cycle-{cycle_id}"
    cached: T | None = cache.get(key)
    if cached is None:
        cached = build()
        cache.set(key, cached, POOL_SHAPE_CACHE_S)
    return cached


def current_pool_shape() -> PoolShape:
    """The queues, quotas and healthy GPUs as the control loop's reader sees them, cached per
    finished scheduling cycle; read afresh while no cycle has finished."""

    def build() -> PoolShape:
        pool = build_pool()
        return pool_shape(pool.queues, pool.nodes)

    return _per_cycle("pool-shape", build)


def current_deserved_shares() -> dict[tuple[str, str], float]:
    """Every queue's deserved share of every flavor (``quotas.shares.deserved_shares``) in
    the current pool shape, cached with it per finished cycle (the Queues page's column:
    30 ms of CPU a request at 400 queues, computed afresh)."""
    return _per_cycle("deserved-shares", lambda: deserved_shares(current_pool_shape()))


@dataclass(frozen=True)
class RequestImpact:
    """What approving a request would change, before anyone decides it; of a request no
    longer open (``closed_as``: its state), the amounts now and no fit (``fits`` None) and no
    "after"."""

    request_id: int
    kind: str
    fits: bool | None
    problems: list[str]
    current: dict[str, str] | None
    requested: dict[str, str]
    after: dict[str, str] | None
    pool: dict[str, str] = field(default_factory=dict)
    share_changes: list[ShareChange] = field(default_factory=list)
    shares_error: str | None = None
    notes: list[str] = field(default_factory=list)
    closed_as: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The impact as JSON (amounts as decimal strings, shares as numbers of GPUs)."""
        return {
            "request": self.request_id,
            "kind": self.kind,
            "closed_as": self.closed_as,
            "fits": self.fits,
            "problems": self.problems,
            "current": self.current,
            "requested": self.requested,
            "after": self.after,
            "pool": self.pool,
            "deserved_shares": [
                {
                    "queue": change.queue,
                    "tenant": change.tenant,
                    "flavor": change.flavor,
                    "before": change.before,
                    "after": change.after,
                    "change": change.change,
                }
                for change in self.share_changes
            ],
            "deserved_shares_error": self.shares_error,
            "notes": self.notes,
        }


def _text(value: Decimal) -> str:
    return format(value.normalize(), "f")


def request_impact(request: QuotaRequest) -> RequestImpact:
    """The impact of ``request`` on the pool as it is now; of a request no longer open, what
    became of it (``closed_as``) and the amounts now, with no "after"."""
    amounts = request.requested_amounts()
    closed_as = request.state if request.state in CLOSED_STATES else None
    problems = [] if closed_as else quota_request_problems(request)
    requested = {key: _text(value) for key, value in amounts.items()}
    if request.kind == QuotaRequestKind.BUDGET:
        assert request.period_start is not None
        budget = PriorityBudget.objects.filter(
            tenant=request.tenant_id,
            priority_class=request.priority_class_id,
            period_start=request.period_start,
        ).first()
        granted = budget.gpu_hours if budget is not None else Decimal(0)
        current = None
        if budget is not None:
            current = {
                "gpu_hours": _text(granted),
                "remaining_gpu_hours": _text(budget.remaining_gpu_hours()),
            }
        return RequestImpact(
            request_id=request.pk,
            kind=request.kind,
            fits=None if closed_as else not problems,
            problems=problems,
            current=current,
            requested=requested,
            after=None if closed_as else {"gpu_hours": _text(granted + amounts["gpu_hours"])},
            closed_as=closed_as,
        )
    assert request.queue is not None and request.flavor is not None
    quota = QueueQuota.objects.filter(queue=request.queue, flavor=request.flavor).first()
    current = None
    if quota is not None:
        current = {
            "guarantee": _text(quota.guarantee),
            "deserved": _text(quota.deserved),
            "capability": _text(quota.capability),
        }
    pool = {
        "flavor": request.flavor.name,
        "healthy_gpus": _text(Decimal(healthy_capacity(request.flavor))),
        "pool_guarantees_now": _text(pool_guarantees(request.flavor)),
    }
    if closed_as:
        made = closed_as == QuotaRequestState.APPLIED
        return RequestImpact(
            request_id=request.pk,
            kind=request.kind,
            fits=None,
            problems=[],
            current=current,
            requested=requested,
            after=None,
            pool=pool,
            shares_error=f"request #{request.pk} is {closed_as}, so no deserved share is shown: "
            + (
                "today's shares already include its change" if made else "its change was never made"
            ),
            closed_as=closed_as,
        )
    pool["pool_guarantees_after"] = _text(
        pool_guarantees(request.flavor, quota_overrides={request.queue.pk: amounts["guarantee"]})
    )
    changes: list[ShareChange] = []
    notes: list[str] = []
    error = None
    if problems:
        # Approval would be refused, so no share moves: the shares of a tree whose guarantees
        # do not fit (scaled down as the core scales them when GPUs fail) are not what
        # approving it would give anyone.
        error = (
            f"request #{request.pk} cannot be approved as it stands, so no deserved share is "
            f"shown: {'; '.join(problems)}"
        )
        return RequestImpact(
            request_id=request.pk,
            kind=request.kind,
            fits=False,
            problems=problems,
            current=current,
            requested=requested,
            after=requested,
            pool=pool,
            shares_error=error,
        )
    try:
        before = current_pool_shape()
        after = before.with_quota(
            request.queue.name,
            request.flavor.name,
            float(amounts["guarantee"]),
            float(amounts["deserved"]),
            float(amounts["capability"]),
        )
        changes = share_changes(before, after)
        capped = capped_by_parent(after, request.queue.name, request.flavor.name)
        if capped is not None:
            notes.append(parent_cap_note(capped, flavor_unit(request.flavor.sharing)))
    except SnapshotError as failure:
        error = f"the pool cannot be read: {failure}"
    except KeyError:
        error = f"queue {request.queue.name} is not in the last cycle's snapshot yet"
    return RequestImpact(
        request_id=request.pk,
        kind=request.kind,
        fits=not problems,
        problems=problems,
        current=current,
        requested=requested,
        after=requested,
        pool=pool,
        share_changes=changes,
        shares_error=error,
        notes=notes,
    )


def _gpus(amount: float) -> str:
    return format(Decimal(str(amount)).normalize(), "f")


def parent_cap_note(capped: ParentCap, unit: str = GPU_UNIT) -> str:
    """The impact's note on a deserved quota the parent's deserved share absorbs, in the
    flavor's ``unit`` (GPUs, or MIG instances)."""
    return (
        f"{capped.queue}'s deserved {_gpus(capped.deserved)} {capped.flavor} {unit}s are capped "
        f"by its parent {capped.parent}: its children's deserved quotas would total "
        f"{_gpus(capped.children_deserved)}, more than {capped.parent}'s deserved "
        f"{_gpus(capped.parent_deserved)}, so {capped.queue}'s deserved share would be "
        f"{_gpus(capped.share)}, not {_gpus(capped.deserved)}; raise {capped.parent}'s "
        f"deserved quota for the change to take full effect"
    )
