"""Contracts: budgets and back-off decide effective priority; protection filters victims.

Contracts are filters plugged into the phases, not branches inside them (KAI's
``minruntime`` plugin is the model):

- **budget** — a class with ``budget_rate > 0`` is honoured only while the tenant's budget
  for it is positive and, for pending work, covers the protected-window reservation
  (GPUs x protected hours x rate; spent by the cycle as it admits such work, so a workload
  that is not admitted holds nothing back); otherwise the workload is treated as the
  default class and preempts nobody.
- **protected window** — a running workload cannot be evicted until ``started_at`` plus its
  protected runtime (capped by the queue's ``max_protected_runtime_s`` unless a budget paid
  for it: at admission, for running work at a class that costs budget, ``window_paid``); a
  workload evicted often recently earns a minimum protection, and one whose eviction a
  disruption budget refused is left alone until ``eviction_refused_until``.
- **back-off** — a pending workload that caused, or whose tenant caused, more than N
  preemptions within W is treated one priority step lower for D after the last of them
  (back-off throttles preemptors; it never lowers running work, which would make victims
  cheaper).
- **starvation** — a workload pending longer than the policy's limit is starving (the cycle
  holds capacity for it).
- **idle** — a running workload whose GPUs have done nothing since ``idle_since`` is alerted
  about after its idle alert timeout and reclaimed after its idle reclaim timeout (its queue's,
  else its declared class's; None: never), never inside its protected window.

The contracts' timers live here too, so that everything that waits for time to pass reads the
same rules: when a protected window ends, a back-off or a victim's extra protection lapses, a
workload starts to starve (``lifecycle.next_change_at`` asks them). A condition stated with a
strict inequality changes one ``INSTANT_S`` after its boundary.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from gpupool.scheduler.types import (
    MILLI,
    SECONDS_PER_HOUR,
    BackoffPolicy,
    PolicyInfo,
    PriorityClassInfo,
    Snapshot,
    WorkloadInfo,
)


@dataclass(frozen=True, slots=True)
class Standing:
    """A workload's effective priority and the contracts that shaped it."""

    value: int
    declared: PriorityClassInfo
    effective: PriorityClassInfo
    budget_demoted: bool = False
    backed_off: bool = False
    budget_remaining: float | None = None
    budget_reservation: float = 0.0

    @property
    def may_preempt(self) -> bool:
        """Whether this workload may evict others (not ``Never``, not demoted for budget)."""
        return not self.budget_demoted and self.declared.preemption_policy != "Never"

    @property
    def may_reclaim(self) -> bool:
        """Whether this workload may take back lent capacity: neither its class nor the one
        it competes at says ``Never`` (reclaim is the queue's right, not the class's, so a
        budget-demoted workload may, like any of the default class)."""
        return "Never" not in (
            self.declared.preemption_policy,
            self.effective.preemption_policy,
        )


def gpu_count(workload: WorkloadInfo) -> float:
    """GPUs the workload holds or asks (fractions count ``gpu_milli / 1000``)."""
    return sum(p.count * p.gpus * p.gpu_milli for p in workload.pod_sets) / MILLI


def history_horizon(policy: PolicyInfo) -> float:
    """How far back preemption events still matter to back-off or victim protection (s)."""
    horizon = 0.0
    if policy.backoff is not None:
        horizon = policy.backoff.window_s + policy.backoff.cooldown_s
    if policy.victim_protection is not None:
        horizon = max(horizon, policy.victim_protection.window_s)
    return horizon


# The timers' resolution: a condition with a strict inequality (``now - submitted_at >
# limit``) is taken to change this long after its boundary (the replay's figure).
INSTANT_S: Final = 1e-6


def first_instant(start: float, holds: Callable[[float], bool]) -> float:
    """``start``, or the next representable time after it at which ``holds`` is true (floating
    point can put a boundary plus a span a hair short of it)."""
    at = start
    while not holds(at):
        at = math.nextafter(at, math.inf)
    return at


def backed_off_at(times: Iterable[float], policy: BackoffPolicy, now: float) -> bool:
    """Whether more than N events fell within a window W that ended less than D ago."""
    return backoff_ends(times, policy, now) is not None


def backoff_ends(times: Iterable[float], policy: BackoffPolicy, now: float) -> float | None:
    """When the back-off in force at ``now`` ends (None when there is none): D after the last
    event that closes a run of more than N events within W."""
    ordered = sorted(t for t in times if t <= now)
    n = policy.max_preemptions
    cooldown = policy.cooldown_s
    last: float | None = None  # the latest event that closes a run and still cools down
    for i in range(n, len(ordered)):
        if ordered[i] - ordered[i - n] <= policy.window_s and now - ordered[i] < cooldown:
            last = ordered[i]
    if last is None:
        return None
    since = last
    return first_instant(since + cooldown, lambda at: not at - since < cooldown)


class Contracts:
    """Effective priority and eviction filters for one cycle."""

    def __init__(self, snapshot: Snapshot, policy: PolicyInfo, now: float) -> None:
        self.policy = policy
        self.now = now
        self.classes = {c.name: c for c in snapshot.priority_classes}
        self.default = next(c for c in snapshot.priority_classes if c.default)
        self.values = sorted({c.value for c in snapshot.priority_classes})
        self.queues = {q.name: q for q in snapshot.queues}
        self.budget = {(b.tenant, b.priority_class): b.remaining for b in snapshot.budgets}
        self.caused_by_workload: dict[str, list[float]] = defaultdict(list)
        self.caused_by_tenant: dict[str, list[float]] = defaultdict(list)
        self.victim_times: dict[str, list[float]] = defaultdict(list)
        for event in snapshot.preemption_history:
            if event.preemptor is not None:
                self.caused_by_workload[event.preemptor].append(event.at)
            if event.preemptor_tenant is not None:
                self.caused_by_tenant[event.preemptor_tenant].append(event.at)
            self.victim_times[event.victim].append(event.at)
        self.idle_policy_set = any(
            c.idle_alert_after_s is not None or c.idle_reclaim_after_s is not None
            for c in snapshot.priority_classes
        ) or any(
            q.idle_alert_after_s is not None or q.idle_reclaim_after_s is not None
            for q in snapshot.queues
        )
        self.standing: dict[str, Standing] = {}
        self._interned: dict[tuple[str, bool, bool, float, float], Standing] = {}
        self._settle(snapshot.workloads)

    def tenant(self, workload: WorkloadInfo) -> str | None:
        """The tenant of the workload's queue."""
        return self.queues[workload.queue].tenant

    def _settle(self, workloads: tuple[WorkloadInfo, ...]) -> None:
        """Decide every workload's standing. A pending workload at a budgeted class is
        elevated when its tenant's remaining budget covers its own reservation; the cycle
        spends the budget as it admits such work (``Cycle.spend_budget``), so one that is not
        admitted holds nothing back from the next."""
        remaining = self.budget
        running = [w for w in workloads if w.state == "running"]
        pending = [w for w in workloads if w.state == "pending"]
        for workload in running:
            klass = self.classes[workload.priority_class]
            if klass.budget_rate == 0:
                left, elevated = 0.0, True
            else:
                left = remaining.get((self.tenant(workload) or "", klass.name), 0.0)
                elevated = left > 0
            self.standing[workload.name] = self._standing(workload, klass, elevated, left, 0.0)
        pending.sort(key=lambda w: (-self.classes[w.priority_class].value, w.submitted_at, w.name))
        for workload in pending:
            klass = self.classes[workload.priority_class]
            if klass.budget_rate == 0:
                self.standing[workload.name] = self._standing(workload, klass, True, 0.0, 0.0)
                continue
            key = (self.tenant(workload) or "", klass.name)
            left = remaining.get(key, 0.0)
            reservation = (
                gpu_count(workload)
                * workload.protected_runtime_s
                / SECONDS_PER_HOUR
                * klass.budget_rate
            )
            elevated = left > 0 and left >= reservation
            self.standing[workload.name] = self._standing(
                workload, klass, elevated, left, reservation
            )

    def budget_key(self, workload: WorkloadInfo) -> tuple[str, str]:
        """The budget a workload's class spends from: (its queue's tenant, its class)."""
        return (self.tenant(workload) or "", workload.priority_class)

    def demoted(self, workload: WorkloadInfo) -> Standing:
        """A pending workload's standing once the budget no longer covers its reservation
        (others admitted before it spent it): the default class, ``budget`` demoted."""
        standing = self.standing[workload.name]
        left = self.budget.get(self.budget_key(workload), 0.0)
        demoted = self._standing(
            workload, standing.declared, False, left, standing.budget_reservation
        )
        self.standing[workload.name] = demoted
        return demoted

    def _standing(
        self,
        workload: WorkloadInfo,
        klass: PriorityClassInfo,
        elevated: bool,
        left: float,
        reservation: float,
    ) -> Standing:
        # Back-off throttles preemptors: it lowers pending work, never running victims.
        backed_off = workload.state == "pending" and self._backed_off(workload)
        key = (klass.name, elevated, backed_off, left, reservation)
        known = self._interned.get(key)
        if known is not None:
            return known
        effective = klass if elevated else self.default
        value = effective.value
        if backed_off:
            value = self.step_down(value)
        known = self._interned[key] = Standing(
            value=value,
            declared=klass,
            effective=effective,
            budget_demoted=not elevated,
            backed_off=backed_off,
            budget_remaining=left if klass.budget_rate > 0 else None,
            budget_reservation=reservation,
        )
        return known

    def _backed_off(self, workload: WorkloadInfo) -> bool:
        policy = self.policy.backoff
        if policy is None or not (self.caused_by_workload or self.caused_by_tenant):
            return False
        if backed_off_at(self.caused_by_workload.get(workload.name, ()), policy, self.now):
            return True
        tenant = self.tenant(workload)
        times = self.caused_by_tenant.get(tenant, ()) if tenant is not None else ()
        return backed_off_at(times, policy, self.now)

    def step_down(self, value: int) -> int:
        """The next lower class value (the same value if none is lower)."""
        index = bisect.bisect_left(self.values, value)
        return self.values[index - 1] if index > 0 else value

    def protected_runtime(self, workload: WorkloadInfo) -> float:
        """Seconds after its start during which the workload cannot be evicted."""
        seconds = self._own_protection(workload)
        protection = self.policy.victim_protection
        if (
            protection is not None
            and workload.name in self.victim_times
            and len(self._recent_evictions(workload)) >= protection.evictions
        ):
            seconds = max(seconds, protection.protected_s)
        return seconds

    def _own_protection(self, workload: WorkloadInfo) -> float:
        """The protected runtime the workload declares, capped by its queue unless a budget
        paid for it (``window_paid``)."""
        seconds = workload.protected_runtime_s
        cap = self.queues[workload.queue].max_protected_runtime_s
        if cap is not None and seconds > cap and not self.window_paid(workload):
            seconds = cap
        return seconds

    def window_paid(self, workload: WorkloadInfo) -> bool:
        """Whether a budget pays for the workload's protection beyond its queue's cap. Running
        work at a class that costs budget: whether its admission reserved the window
        (``WorkloadInfo.window_reserved``), not how the budget stands now -- work admitted
        demoted never bought its window, and work that did keeps it when the budget is spent
        to nothing meanwhile. Otherwise (pending work, a free class, or not known): whether
        it competes at a class that costs budget now."""
        standing = self.standing[workload.name]
        reserved = workload.window_reserved
        if (
            reserved is not None
            and workload.state == "running"
            and standing.declared.budget_rate > 0
        ):
            return reserved
        return standing.effective.budget_rate > 0

    def _recent_evictions(self, workload: WorkloadInfo) -> list[float]:
        """When the workload was evicted within the victim-protection window, oldest first."""
        protection = self.policy.victim_protection
        if protection is None:
            return []
        return sorted(
            t
            for t in self.victim_times.get(workload.name, ())
            if self.now - protection.window_s <= t <= self.now
        )

    def protected_until(self, workload: WorkloadInfo) -> float:
        """When the workload's protected window ends (its start if it has none), or a
        disruption budget's refusal of its eviction, if that ends later."""
        start = workload.started_at if workload.started_at is not None else self.now
        until = start + self.protected_runtime(workload)
        refused = workload.eviction_refused_until
        return until if refused is None or refused <= until else refused

    def evictable(self, workload: WorkloadInfo) -> bool:
        """Victim filter: running, not already leaving, outside its protected window."""
        if workload.leaving:
            return False
        if (
            workload.protected_runtime_s == 0
            and workload.name not in self.victim_times
            and workload.evicting_for is None
            and workload.eviction_refused_until is None
            and workload.state == "running"
        ):
            return (workload.started_at or self.now) <= self.now  # no window to wait for
        return (
            workload.state == "running"
            and workload.evicting_for is None
            and self.protected_until(workload) <= self.now
        )

    def idle_timeouts(self, workload: WorkloadInfo) -> tuple[float | None, float | None]:
        """Seconds idle before the workload is alerted about, and before it is reclaimed
        (None: never): its queue's where the queue sets one, else its declared class's."""
        queue = self.queues[workload.queue]
        klass = self.classes[workload.priority_class]
        alert = queue.idle_alert_after_s
        reclaim = queue.idle_reclaim_after_s
        return (
            klass.idle_alert_after_s if alert is None else alert,
            klass.idle_reclaim_after_s if reclaim is None else reclaim,
        )

    def idle_reclaimable(self, workload: WorkloadInfo) -> bool:
        """Idle filter: running, not leaving, idle at least its reclaim timeout, and outside
        its protected window (``evictable``)."""
        if workload.idle_since is None or workload.state != "running":
            return False
        reclaim = self.idle_timeouts(workload)[1]
        return (
            reclaim is not None
            and self.now - workload.idle_since >= reclaim
            and self.evictable(workload)
        )

    def may_preempt_victim(self, preemptor: WorkloadInfo, victim: WorkloadInfo) -> bool:
        """Preemption filter: the victim's effective priority is strictly lower."""
        return self.standing[victim.name].value < self.standing[preemptor.name].value

    def starving(self, workload: WorkloadInfo) -> bool:
        """Whether the workload has waited past the policy's starvation limit."""
        limit = self.policy.starvation_limit_s
        return limit is not None and self.now - workload.submitted_at > limit

    # -- timers: when a contract's verdict on a workload changes with no other change --------

    def starves_at(self, workload: WorkloadInfo) -> float | None:
        """When the workload first counts as starving (None: the policy sets no limit)."""
        limit = self.policy.starvation_limit_s
        if limit is None:
            return None
        since = workload.submitted_at
        return first_instant(since + limit + INSTANT_S, lambda at: at - since > limit)

    def backoff_ends_at(self, workload: WorkloadInfo) -> float | None:
        """When the back-off lowering a pending workload now ends, its own and its tenant's
        (None: it is not backed off)."""
        policy = self.policy.backoff
        if policy is None or not self.standing[workload.name].backed_off:
            return None
        ends = [backoff_ends(self.caused_by_workload.get(workload.name, ()), policy, self.now)]
        tenant = self.tenant(workload)
        if tenant is not None:
            ends.append(backoff_ends(self.caused_by_tenant.get(tenant, ()), policy, self.now))
        return max((end for end in ends if end is not None), default=None)

    def backoff_facts(self, workload: WorkloadInfo) -> dict[str, object] | None:
        """What a pending workload's back-off rests on, for its explanation: whose
        preemptions (the workload's own or its tenant's), how many within the window, and
        until when it competes one priority step lower (POSIX seconds). None: no back-off."""
        policy = self.policy.backoff
        if policy is None or not self.standing[workload.name].backed_off:
            return None
        tenant = self.tenant(workload)
        sources = [("workload", self.caused_by_workload.get(workload.name, []))]
        if tenant is not None:
            sources.append(("tenant", self.caused_by_tenant.get(tenant, [])))
        best: tuple[float, str, int] | None = None
        for who, times in sources:
            until = backoff_ends(times, policy, self.now)
            if until is None:
                continue
            count = sum(1 for t in times if self.now - policy.window_s <= t <= self.now)
            if best is None or until > best[0]:
                best = (until, who, count)
        if best is None:
            return None
        until, who, count = best
        return {"caused_by": who, "preemptions": count, "window_s": policy.window_s, "until": until}

    def idle_reclaim_at(self, workload: WorkloadInfo) -> float | None:
        """When an idle running workload becomes reclaimable if it stays idle: its reclaim
        timeout after its idle spell began, or the end of its protected window if later
        (None: it is not idle, or its policy never reclaims it)."""
        if workload.idle_since is None or workload.state != "running" or workload.leaving:
            return None
        reclaim = self.idle_timeouts(workload)[1]
        if reclaim is None:
            return None
        return max(workload.idle_since + reclaim, self.protected_until(workload))

    def starving_since(self, workload: WorkloadInfo) -> float | None:
        """When the workload's starvation limit was reached (None: the policy sets none)."""
        limit = self.policy.starvation_limit_s
        return None if limit is None else workload.submitted_at + limit

    def victim_protection_ends_at(self, workload: WorkloadInfo) -> float | None:
        """When the minimum protection the workload earned as a repeated victim lapses: just
        after the eviction whose leaving the window drops the count below the threshold
        (None: it has none, or it adds nothing to the workload's own window)."""
        protection = self.policy.victim_protection
        if protection is None or workload.name not in self.victim_times:
            return None
        recent = self._recent_evictions(workload)
        if len(recent) < protection.evictions:
            return None
        if protection.protected_s <= self._own_protection(workload):
            return None
        leaving = recent[len(recent) - protection.evictions]
        window = protection.window_s
        return first_instant(leaving + window + INSTANT_S, lambda at: at - window > leaving)
