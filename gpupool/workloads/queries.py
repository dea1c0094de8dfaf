"""What people ask about workloads, as functions the API and the pages share: the rows of a
list, one workload's whole story (timeline, explanation, who preempted it), and the dry-run.

Nothing here computes what the control loop records: the explanation, queue position and
estimated start are read from the fields the loop writes each cycle, the preemptions from its
``PreemptionEvent`` rows. The dry-run asks the decision core (``scheduler.estimate.dry_run``) on
the snapshot of the last finished cycle (``control.queries.pool_snapshot``).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from decimal import Decimal
from typing import Any, Final, Protocol, cast, get_args

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Prefetch, Q, QuerySet

from gpupool.accounting.choices import PreemptionReason
from gpupool.accounting.models import PreemptionEvent
from gpupool.api.access import Access
from gpupool.audit.models import AuditEvent
from gpupool.control.clock import pool_now
from gpupool.control.queries import RefusedPods, pool_policy, pool_snapshot, refused_pods
from gpupool.control.snapshot import core_topology, pod_set_info
from gpupool.inventory.units import GPU_UNIT, MIG_UNIT, flavor_unit
from gpupool.scheduler.contracts import backoff_ends
from gpupool.scheduler.estimate import dry_run
from gpupool.scheduler.explain import (
    NEVER_FITS_FACT,
    Verdict,
    explanation,
    never_fits,
)
from gpupool.scheduler.lifecycle import ENDING_REASONS
from gpupool.scheduler.types import (
    BackoffPolicy,
    PendingReason,
    VictimProtectionPolicy,
    WorkloadInfo,
)
from gpupool.tenancy.models import TenantNamespace
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.choices import Origin, WorkloadState
from gpupool.workloads.models import (
    Placement,
    PodSet,
    PodSetFlavorChoice,
    Workload,
    WorkloadExplanation,
    WorkloadTransition,
    gpu_equivalent,
    pods_waited_for,
    set_position,
)

# The key of the loop's explanation facts that says an estimated start rests on runtimes
# learned from similar finished work rather than on declared ones.
ESTIMATE_LEARNED_FACT = "estimate_learned"
# ... and the key that says when the replay that estimates starts stopped looking ahead
# without admitting it (control/estimates.py): it does not start before then.
ESTIMATE_NOT_BEFORE_FACT = "estimate_not_before"


def _with_names() -> QuerySet[Workload]:
    """Workloads with their names and their explanations (``Workload.pending_reason`` and the
    rest read it) joined in."""
    return Workload.objects.select_related(
        "queue", "queue__tenant", "priority_class", "submitter", "explanation"
    )


def workload_rows() -> QuerySet[Workload]:
    """Workloads with what a list shows (queue, tenant, class, submitter, pod sets), in a
    fixed number of queries whatever their number."""
    return _with_names().prefetch_related(
        Prefetch("pod_sets", queryset=PodSet.objects.select_related("flavor").order_by("id"))
    )


def workload_list() -> QuerySet[Workload]:
    """Workloads with the names a list shows (queue, tenant, class, submitter), without their
    pod sets: a page's GPUs come from ``gpus_by_workload`` (one query of values, where
    prefetching the pod sets built a model instance per pod set)."""
    return _with_names().only(*LIST_COLUMNS)


# What a list of workloads reads of each row and its related rows (``workload_list``).
LIST_COLUMNS = (
    "namespace",
    "name",
    "state",
    "submitted_at",
    "admitted_at",
    "started_at",
    "finished_at",
    "explanation__reason",
    "explanation__queue_rank",
    "estimated_start_at",
    "idle_since",
    "queue__name",
    "queue__tenant__name",
    "priority_class__name",
    "submitter__username",
)


@dataclass(frozen=True, slots=True)
class Asks:
    """What a workload asks: its GPUs (``total_gpus``) and what they count (``unit_of``)."""

    gpus: Decimal
    unit: str


def asks_by_workload(ids: Iterable[int]) -> dict[int, Asks]:
    """What each workload of ``ids`` asks (``Asks``), from its pod sets' values and their
    flavors' and further choices' sharing, in one query for a whole page."""
    totals: dict[int, Decimal] = dict.fromkeys(ids, Decimal(0))
    units: dict[int, set[str]] = defaultdict(set)
    counted: set[int] = set()  # a pod set of several choices is one row per choice
    rows = PodSet.objects.filter(workload_id__in=list(totals)).order_by()
    for pk, workload_id, count, gpus, milli, sharing, choice in rows.values_list(
        "id",
        "workload_id",
        "count",
        "gpus",
        "gpu_milli",
        "flavor__sharing",
        "flavor_choices__flavor__sharing",
    ):
        if pk not in counted:
            counted.add(pk)
            totals[workload_id] += count * gpu_equivalent(gpus, milli)
        units[workload_id].update(flavor_unit(of) for of in (sharing, choice) if of is not None)
    return {pk: Asks(total, unit_of(units[pk])) for pk, total in totals.items()}


def unit_of(units: Collection[str]) -> str:
    """What a workload's GPUs count (``gpus`` in the API, Asks on the pages), from the units
    of every flavor its pod sets may run on (``inventory.units.flavor_unit``): "MIG instance"
    where each is a MIG flavor, else "GPU" (flavors of both units, or none) -- the
    preemptions' rule for what a victim freed (``inventory.units.freed_unit``)."""
    return MIG_UNIT if set(units) == {MIG_UNIT} else GPU_UNIT


def unit_of_workload(workload: Workload) -> str:
    """``unit_of`` one workload, from its prefetched pod sets and their flavors."""
    return unit_of(
        {
            flavor_unit(flavor.sharing)
            for pod_set in workload.pod_sets.all()
            for flavor in pod_set.flavors()
        }
    )


def preemption_rows() -> QuerySet[PreemptionEvent]:
    """Preemption events with both sides' queues, tenants and the preemptor's class."""
    return PreemptionEvent.objects.select_related(
        "victim",
        "victim_queue",
        "victim_tenant",
        "preemptor",
        "preemptor__priority_class",
        "preemptor__submitter",
        "preemptor_queue",
        "preemptor_tenant",
    )


def preemption_list() -> QuerySet[PreemptionEvent]:
    """``preemption_rows`` with only the columns the API's list reads: the workloads on both
    sides carry JSON and a dozen times each, and decoding them was a quarter of a page's CPU."""
    return preemption_rows().only(
        "at",
        "reason",
        "gpus_freed",
        "lost_gpu_hours",
        "cycle",
        "victim__namespace",
        "victim__name",
        "victim_queue__name",
        "victim_tenant__name",
        "preemptor__namespace",
        "preemptor__name",
        "preemptor__priority_class__name",
        "preemptor__submitter__username",
        "preemptor_queue__name",
        "preemptor_tenant__name",
        "nodes",
    )


def workload_story() -> QuerySet[Workload]:
    """Workloads with everything their detail shows: pod sets with flavor choices, placements,
    the timeline of transitions and the preemptions they suffered."""
    return _with_names().prefetch_related(
        Prefetch(
            "pod_sets",
            queryset=PodSet.objects.select_related("flavor")
            .prefetch_related(
                Prefetch(
                    "flavor_choices",
                    queryset=PodSetFlavorChoice.objects.select_related("flavor").order_by("rank"),
                )
            )
            .order_by("id"),
        ),
        Prefetch(
            "placements",
            queryset=Placement.objects.select_related("node__flavor", "pod_set").order_by(
                "pod_set_id", "pod_index"
            ),
        ),
        Prefetch(
            "transitions",
            queryset=WorkloadTransition.objects.select_related("actor").order_by("at", "id"),
        ),
        Prefetch("preempted_by", queryset=preemption_rows().order_by("at", "id")),
    )


# The audit action of an elastic gang that grew (``control.actions._record_growths``): its
# history of growth, as the workload's page and API tell it (``growths``).
GROW_ACTION = "control.grow_workload"


@dataclass(frozen=True, slots=True)
class Growth:
    """An elastic gang grew: when, from and to how many pods, and why in words."""

    at: datetime
    from_pods: int
    to_pods: int
    reason: str


def growths(workload: Workload) -> list[Growth]:
    """The times an elastic gang grew into free capacity, oldest first (one query; none for
    a workload that is no elastic gang)."""
    if workload.min_member is None:
        return []
    rows = AuditEvent.objects.filter(
        action=GROW_ACTION, object_type="workloads.workload", object_id=str(workload.pk)
    ).order_by("at", "id")
    return [
        Growth(at, int((before or {}).get("pods", 0)), int((after or {}).get("pods", 0)), reason)
        for at, before, after, reason in rows.values_list("at", "before", "after", "reason")
    ]


def total_gpus(workload: Workload) -> Decimal:
    """GPUs the whole workload asks (shared flavors count their fraction), from its
    prefetched pod sets."""
    return sum(
        (pod_set.count * pod_set.gpu_equivalent_per_pod() for pod_set in workload.pod_sets.all()),
        Decimal(0),
    )


def sees_preemptor(access: Access, event: PreemptionEvent) -> bool:
    """Whether the caller may see which workload (and whose) caused a preemption: admins, and
    members of the preemptor's own tenant; the victim's tenant sees only its queue and class."""
    return sees_preemptor_of(access, event.preemptor_tenant_id)


def sees_preemptor_of(access: Access, preemptor_tenant_id: int | None) -> bool:
    """``sees_preemptor`` from the event's preemptor tenant id (a list read as values)."""
    return access.admin or (
        preemptor_tenant_id is not None and preemptor_tenant_id in access.tenant_ids
    )


# How a sentence names a workload of a team the reader is not in (a preemption names such a
# preemptor by its queue and class only): its name is that team's to see.
ANOTHER_TEAMS_WORKLOAD = "another team's workload"


class NamesSeen:
    """Which workloads (``namespace/name``) a caller may see named in an explanation -- a
    preemptor's victims, the workload capacity is held for: an admin every one, anyone else
    those of their own teams, by their tenants' namespaces (``sees_preemptor``'s rule, for
    names the facts give without a tenant). Reads the caller's namespaces once, the first
    time another namespace's name is asked about: one query a request, none a row."""

    def __init__(self, access: Access) -> None:
        self.access = access
        self._own: frozenset[str] | None = None

    def sees(self, workload: object) -> bool:
        """Whether the caller may see the workload ``namespace/name`` named."""
        if self.access.admin:
            return True
        if self._own is None:
            self._own = frozenset(
                TenantNamespace.objects.filter(tenant_id__in=self.access.tenant_ids).values_list(
                    "name", flat=True
                )
            )
        return str(workload).partition("/")[0] in self._own


class SeesNames(Protocol):
    """Who reads an explanation, as far as the workloads it names go (``NamesSeen``,
    ``TeamSees``)."""

    def sees(self, workload: object) -> bool: ...


@dataclass(frozen=True, slots=True)
class TeamSees:
    """What a team reads where nobody signs in: the Events on its own pods (``kubectl
    describe pod``, the control loop's). Workloads of its tenant's namespaces are named,
    another team's are not, as ``NamesSeen`` rules for a member of that team.
    ``namespaces``: namespace -> tenant (the loop's, as its sync read them)."""

    tenant: str | None
    namespaces: Mapping[str, str]

    def sees(self, workload: object) -> bool:
        namespace = str(workload).partition("/")[0]
        return self.tenant is not None and self.namespaces.get(namespace) == self.tenant


class AsWritten:
    """The reader who reads an explanation as written, every workload it names named: for the
    internal callers that need the raw text (a cycle's own sentences, a reader that shows none
    of a sentence's names), never for a person's page, API answer or CLI output -- pass
    ``NamesSeen`` for those. Its one instance is ``AS_WRITTEN``."""

    def sees(self, workload: object) -> bool:
        return True

    def __repr__(self) -> str:
        return "AS_WRITTEN"


# Who reads, said outright: the readers of explanations (``sentence``, ``current_sentence``,
# ``summary``, ``explain``, ``sentence_seen_by``, ``dry_run_submission``) take their reader
# with no default, so that a new caller cannot forget it and show another team's workload
# names by omission (``test_readers_say_who_reads``).
AS_WRITTEN: Final = AsWritten()


def _said_who_reads(seen: object) -> None:
    """Refuse a reader given as None (the old "as written"): say ``AS_WRITTEN`` outright."""
    if seen is None:
        raise TypeError(
            "an explanation's reader must say who reads: NamesSeen(access), TeamSees(...), "
            "or AS_WRITTEN for the text as written"
        )


def names_seen(viewer: Access | NamesSeen) -> NamesSeen:
    """The caller's ``NamesSeen`` (one a request: pass it on rather than its ``Access``)."""
    return viewer if isinstance(viewer, NamesSeen) else NamesSeen(viewer)


# The facts that name workloads of any team: a preemptor's victims (a list), the workload
# capacity is held for; and the facts nesting a verdict's own (a budget's next layer).
VICTIMS_FACT = "victims"
HELD_FOR_FACT = "held_for"
NESTED_FACTS = ("then_facts",)


def facts_seen_by(facts: Mapping[str, object], viewer: Access | NamesSeen) -> Mapping[str, object]:
    """``facts`` as the caller may see them, wherever they leave the server (the API's
    ``explanation.facts``, so ``gpupool why``; the workload page): a preemptor's victims
    (``victims``, ``namespace/name``) are named only to admins and to the victims' own
    teams, as a preemption's preemptor is (``sees_preemptor``), and the workload capacity is
    held for (``held_for``) only to admins and its own team: another team's is left out; how
    many of which queue (``victim_queues``, the sentence's) is everyone's. The same in the
    facts of a budget's next layer (``then_facts``). No query for an admin, nor for facts
    that name no workload (``NamesSeen``)."""
    seen = names_seen(viewer)
    if seen.access.admin:
        return facts
    shown: dict[str, object] = {}
    changed = False
    for key, value in facts.items():
        if key == VICTIMS_FACT and isinstance(value, list):
            named = [victim for victim in value if seen.sees(victim)]
            changed = changed or len(named) != len(value)
            if named or not value:
                shown[key] = named
        elif key == HELD_FOR_FACT and value and not seen.sees(value):
            changed = True
        elif key in NESTED_FACTS and isinstance(value, Mapping):
            nested = facts_seen_by(value, seen)
            changed = changed or nested is not value
            shown[key] = nested
        else:
            shown[key] = value
    return shown if changed else facts


def _holders(facts: Mapping[str, object]) -> list[str]:
    """The workloads the facts say capacity is held for (``held_for``, a budget's next
    layer's too): what a sentence may name."""
    found = [str(facts[HELD_FOR_FACT])] if facts.get(HELD_FOR_FACT) else []
    for key in NESTED_FACTS:
        nested = facts.get(key)
        if isinstance(nested, Mapping):
            found += _holders(nested)
    return found


def sentence_seen_by(text: str, facts: Mapping[str, object], seen: SeesNames) -> str:
    """An explanation's sentence as the caller may read it: where it names a workload
    capacity is held for (the core's "Capacity is held for <namespace/name> ...") that the
    caller may not see named (``NamesSeen``; a team's own pods: ``TeamSees``), "another
    team's workload" in its place. The sentence as written for ``AS_WRITTEN``."""
    _said_who_reads(seen)
    if isinstance(seen, AsWritten):
        return text
    for holder in _holders(facts):
        if not seen.sees(holder):
            # The name alone, not inside a longer one ("vision/a" in "vision/ab").
            alone = rf"(?<![\w./-]){re.escape(holder)}(?![\w/-]|\.\w)"
            text = re.sub(alone, ANOTHER_TEAMS_WORKLOAD, text)
    return text


def eviction_refusal(workload: Workload, access: Access) -> dict[str, Any] | None:
    """The eviction of the workload a PodDisruptionBudget refused last, while it is current
    (the control loop keeps it on the row, ``Workload.eviction_refusal``, until an eviction
    is accepted or no longer wanted; shown only while the workload runs): when, the budget
    (``namespace/name``, empty when the refusal named none) and what it needs, why it was
    evicted (``admin``: a drain), the nodes it holds, the preemptor where the caller may see
    it (``sees_preemptor_of``), and the sentence its pods were told. None otherwise."""
    refusal = workload.eviction_refusal
    if not isinstance(refusal, dict) or workload.state != WorkloadState.RUNNING:
        return None
    at = refusal.get("at")
    named = sees_preemptor_of(access, refusal.get("preemptor_tenant_id"))
    return {
        "at": datetime.fromisoformat(at) if isinstance(at, str) else None,
        "budget": str(refusal.get("budget") or ""),
        "needs": str(refusal.get("needs") or ""),
        "reason": str(refusal.get("reason") or ""),
        "nodes": [str(node) for node in refusal.get("nodes") or ()],
        "preemptor": refusal.get("preemptor") if named else None,
        "detail": str(refusal.get("detail") or ""),
    }


def refused_workloads(access: Access) -> RefusedPods:
    """The pods gpupool will not schedule that the caller may see, as the last succeeded cycle
    recorded them (``control.queries.refused_pods``, what the My workloads page lists): an
    admin every one, anyone else those in the namespaces of their tenants (such pods are no
    workload, so they have no queue to scope them by)."""
    if access.admin:
        return refused_pods(None)
    return refused_pods(
        frozenset(
            TenantNamespace.objects.filter(tenant_id__in=access.tenant_ids).values_list(
                "name", flat=True
            )
        )
    )


@dataclass(frozen=True, slots=True)
class Explanation:
    """Where a workload stands, in plain words and with the loop's numbers."""

    state: str
    reason: str
    detail: str
    facts: Mapping[str, object]
    queue_position: int | None
    estimated_start_at: datetime | None
    estimate_learned: bool | None
    estimate_not_before: datetime | None  # no estimate: the replay stopped here without it
    # The estimate (or where the replay stopped) is before the pool's now: estimates are
    # refreshed off the cycle, about once a minute, so it is due, not still to come.
    estimate_passed: bool
    never_fits: bool  # set aside: no position, no estimate (``scheduler.explain.never_fits``)
    # A gang waiting for pods the cluster has not made: no position, no estimate
    # (``models.pods_waited_for``; its facts' ``missing_pods`` say how many).
    waits_for_pods: bool
    summary: str


def explain(
    workload: Workload,
    zone: tzinfo = UTC,
    now: datetime | None = None,
    *,
    seen: NamesSeen | AsWritten,
    units: Mapping[str, str],
) -> Explanation:
    """The workload's current explanation, as the last cycle recorded it, with one summary
    sentence for people, its moments in ``zone`` (``summary``: the API and the CLI say it in
    UTC; the workload page shows it in the viewer's zone). Work the core set aside as never
    fitting has no position and no estimated start, whatever a row written before it was set
    aside still holds; nor has a gang that waits for its pods (``pods_waited_for``). Its
    facts and sentences as the caller ``seen`` may see them (``facts_seen_by``,
    ``sentence_seen_by``: another team's workloads unnamed); as written for ``AS_WRITTEN``.
    ``units``: the flavors' units (``inventory.units.FlavorUnits``, one a request), for the
    sentences said again (``sentence``)."""
    _said_who_reads(seen)
    facts = dict(workload.pending_facts or {})
    learned = facts.get(ESTIMATE_LEARNED_FACT)
    pending = workload.state == WorkloadState.PENDING
    never = pending and never_fits(facts)
    for_pods = pending and not never and pods_waited_for(workload.pending_reason, facts) > 0
    # In line: with a position and an estimate (or where the estimates stopped looking). A
    # gang that waits for its pods has neither, whatever its row kept until the estimates'
    # next refresh (the cycle's writes keep their facts; ``waits_in_line``).
    in_line = pending and not never and not for_pods
    estimate_learned = bool(learned) if in_line and learned is not None else None
    estimated = workload.estimated_start_at if in_line else None
    not_before = not_before_of(workload) if in_line else None
    moment = estimated or not_before
    if moment is not None and now is None:
        now = pool_now()  # (one query, only for an estimate to compare)
    return Explanation(
        state=workload.state,
        reason=workload.pending_reason if pending else "",
        detail=current_sentence(workload, seen=seen, units=units, zone=zone) if pending else "",
        facts=(facts if isinstance(seen, AsWritten) else dict(facts_seen_by(facts, seen)))
        if pending
        else {},
        queue_position=workload.queue_position if in_line else None,
        estimated_start_at=estimated,
        estimate_learned=estimate_learned,
        estimate_not_before=not_before,
        estimate_passed=moment is not None and now is not None and moment < now,
        never_fits=never,
        waits_for_pods=for_pods,
        summary=summary(workload, estimate_learned, zone, now, seen=seen, units=units),
    )


def waits_in_line(workload: Workload) -> bool:
    """Whether a workload waits in line (``explain``'s rule): pending, with a position and an
    estimate (or where the estimates stopped looking). Work the core set aside as never
    fitting has neither, nor has a gang that waits for its pods."""
    if workload.state != WorkloadState.PENDING:
        return False
    facts = workload.pending_facts or {}
    return not never_fits(facts) and not pods_waited_for(workload.pending_reason, facts) > 0


def estimate_not_before(workload: Workload) -> datetime | None:
    """``explain``'s ``estimate_not_before`` alone (no sentence said, so no reader): where the
    estimates stopped looking ahead without starting a workload in line (``not_before_of``)."""
    return not_before_of(workload) if waits_in_line(workload) else None


# ----------------------------------------------------------------------------- positions


def queue_positions(pending: Iterable[tuple[int, int, float]]) -> dict[int, int]:
    """Positions (id -> 1, 2, ...) of pending workloads given as (id, queue id, queue rank):
    each counted among its queue's pending workloads that a cycle ranked, in one query for
    all their queues. The loop keeps ranks, not positions (``control/record.py``): work
    admitted ahead moves a position without a write."""
    wanted = list(pending)
    if not wanted:
        return {}
    ranks: dict[int, list[float]] = defaultdict(list)
    for queue_id, rank in (
        Workload.objects.filter(
            queue_id__in={queue_id for _, queue_id, _ in wanted},
            state=WorkloadState.PENDING,
            explanation__queue_rank__isnull=False,
        )
        .order_by()  # no sort in the server: sorted below, by queue
        .values_list("queue_id", "explanation__queue_rank")
    ):
        if rank is not None:
            ranks[queue_id].append(rank)
    for queue_ranks in ranks.values():
        queue_ranks.sort()
    return {pk: bisect_right(ranks[queue_id], rank) for pk, queue_id, rank in wanted}


def fill_positions(workloads: Iterable[Workload]) -> None:
    """Count the positions of a list's workloads at once (``Workload.queue_position`` would
    count each alone)."""
    listed = list(workloads)
    counted = queue_positions(
        (w.pk, w.queue_id, w.queue_rank)
        for w in listed
        if w.state == WorkloadState.PENDING and w.queue_rank is not None
    )
    for workload in listed:
        set_position(workload, counted.get(workload.pk))


@dataclass(frozen=True, slots=True)
class SetAside:
    """Of a list's pending workloads, what their explanations' facts say the rows do not
    carry (``set_aside_and_waiting``)."""

    never: set[int]  # set aside as never fitting (``scheduler.explain.never_fits``)
    waiting: set[int]  # gangs that wait for their pods (``models.pods_waited_for``)
    # Of the others, where the estimates' replay stopped looking ahead without starting
    # them (``not_before_in``; whether a row has an estimate is its own field: ``not_before_of``).
    not_before: dict[int, datetime]


def set_aside_and_waiting(pending: Iterable[int]) -> SetAside:
    """Which of the pending workloads ``pending`` (ids) the core set aside as never fitting
    (``scheduler.explain.never_fits``), and which are gangs that wait for their pods
    (``pods_waited_for``): neither has a position or an estimated start; and, of the others,
    where the estimates stopped looking ahead (``not_before_in``). One query of their
    explanations (none when no id is given): a list's rows do not carry the facts."""
    ids = list(pending)
    found = SetAside(set(), set(), {})
    if not ids:
        return found
    rows = WorkloadExplanation.objects.filter(workload_id__in=ids).filter(
        Q(**{f"facts__{NEVER_FITS_FACT}": True})
        | Q(reason="gang")
        | Q(facts__has_key=ESTIMATE_NOT_BEFORE_FACT)
    )
    for workload_id, reason, facts in rows.values_list("workload_id", "reason", "facts"):
        if never_fits(facts):
            found.never.add(workload_id)
        elif pods_waited_for(reason, facts):
            found.waiting.add(workload_id)
        elif (moment := not_before_in(facts)) is not None:
            found.not_before[workload_id] = moment
    return found


def says_position(reason: str, facts: Mapping[str, object]) -> bool:
    """Whether the core's sentence for this reason says the position (``scheduler.explain``:
    work behind others, also after a budget demotion), which moves without a new write."""
    return reason == "behind" or (reason == "budget" and facts.get("then") == "behind")


def sentence(
    reason: str,
    facts: Mapping[str, object],
    position: int | None,
    written: str,
    seen: SeesNames,
    *,
    units: Mapping[str, str],
    zone: tzinfo,
) -> str:
    """The explanation's sentence with the current position: for a sentence that says it,
    the core's words rendered again from the facts (``scheduler.explain``), as the cycle
    that wrote them would say it now, each flavor's quantities in its unit (``units``: the
    flavors' units, ``inventory.units.FlavorUnits`` for a request -- a MIG flavor's in MIG
    instances, as the core said them); any other sentence as written (the explanation is
    written again when its facts move; and one no cycle wrote facts for). For a reader
    ``seen``, another team's workload it names is "another team's workload"
    (``sentence_seen_by``); ``AS_WRITTEN`` for the words as the core says them.

    Its moments (the core says each in UTC, ``scheduler.explain.when``) read in ``zone``, as
    the summaries' do (``moments_in``): UTC for the API, the CLI and the pods' Events, the
    viewer's zone on the pages.

    Neither ``seen``, ``units`` nor ``zone`` has a default (say who reads, in which units and
    zone): a request's reader passes its ``FlavorUnits``, the control loop's Events their
    snapshot's (``scheduler.explain.flavor_units``, ``ControlLoop._told``)."""
    _said_who_reads(seen)
    said = written  # as written, unless it says the position, which moves unwritten
    core_reason = bool(facts) and reason in get_args(PendingReason)
    if position is not None and core_reason and says_position(reason, facts):
        verdict = Verdict(cast(PendingReason, reason), dict(facts))
        said = explanation("", verdict, position, units).detail
    return moments_in(sentence_seen_by(said, facts, seen), zone)


# A moment as the core says it in a sentence (``scheduler.explain.when``: "2026-12-08 15:03
# UTC"), not inside a quoted value (a label or annotation the sentence repeats as written).
_CORE_MOMENT = re.compile(r"(?<![\"'\w])(\d{4}-\d{2}-\d{2} \d{2}:\d{2}) UTC(?![+\-\w])")


def moments_in(text: str, zone: tzinfo) -> str:
    """The core's moments in a sentence (``scheduler.explain.when``, in UTC) said again in
    ``zone``, as the summaries say theirs (``_when``): "until 2026-12-08 18:09 UTC" reads
    "until 2026-12-08 19:09 UTC+1" on a page in Paris. The same text in UTC."""

    def said_in_zone(found: re.Match[str]) -> str:
        moment = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M").replace(tzinfo=UTC)
        return _when(moment, zone)

    return _CORE_MOMENT.sub(said_in_zone, text)


def current_sentence(
    workload: Workload, *, seen: SeesNames, units: Mapping[str, str], zone: tzinfo
) -> str:
    """A pending workload's sentence with its current position (``sentence``), as the
    reader ``seen`` may read it, its quantities in the flavors' ``units``, its moments in
    ``zone``."""
    return sentence(
        workload.pending_reason,
        workload.pending_facts or {},
        workload.queue_position,
        workload.pending_detail,
        seen,
        units=units,
        zone=zone,
    )


def not_before_in(facts: Mapping[str, object] | None) -> datetime | None:
    """Where the estimates' replay stopped looking ahead without starting a pending workload,
    from its explanation's facts (``estimate_not_before``: an ISO time, UTC when it names no
    zone); None when they hold none. The one reader of the fact: ``not_before_of``, a list's
    rows (``set_aside_and_waiting``) and the My workloads table read it here."""
    written = (facts or {}).get(ESTIMATE_NOT_BEFORE_FACT)
    if not isinstance(written, str):
        return None
    try:
        moment = datetime.fromisoformat(written)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def not_before_of(workload: Workload) -> datetime | None:
    """When a pending workload without an estimated start starts at the earliest: where the
    estimates' replay stopped looking ahead (None when it has an estimate, or no bound)."""
    if workload.estimated_start_at is not None:
        return None
    return not_before_in(workload.pending_facts)


def zone_name(moment: datetime) -> str:
    """The zone of an aware moment by its offset from UTC: ``UTC``, ``UTC+1``, ``UTC+5:30``,
    ``UTC-3`` (empty for a naive one). The one way a time's zone is named, in the summaries
    and on the pages (an abbreviation such as CET is ambiguous, and many zones have none;
    the browser's ``frontend/js/time.js`` names it the same way)."""
    offset = moment.utcoffset()
    if offset is None:
        return ""
    minutes = round(offset.total_seconds() / 60)
    if minutes == 0:
        return "UTC"
    hours, rest = divmod(abs(minutes), 60)
    return f"UTC{'+' if minutes > 0 else '-'}{hours}" + (f":{rest:02d}" if rest else "")


def _when(moment: datetime | None, zone: tzinfo) -> str:
    """A moment of a summary as its wall time in ``zone``, named (``zone_name``):
    ``2026-12-05 14:03 UTC``, ``2026-12-05 15:03 UTC+1``."""
    if moment is None:
        return "unknown"
    shown = moment.astimezone(zone)
    return f"{shown:%Y-%m-%d %H:%M} {zone_name(shown)}".strip()


# How the core opens most of its never-fits sentences (``scheduler.explain``): a sentence
# that says so itself ("Never fits: ", "nlp/x will not run as asked: ") reads on without it.
NEVER_AS_ASKED = "It can never run as asked: "


def never_fits_reason(never: str) -> str:
    """A never-fits sentence (the core's, the dry-run's) without its opening "It can never
    run as asked: ", for a sentence that says so itself ("Never fits: no h100 node matches
    its node selector, ...", the submit warning's "nlp/x will not run as asked: it must sit
    in one NVLink domain, ..."); a sentence that opens otherwise as it is."""
    return never.removeprefix(NEVER_AS_ASKED)


def summary(
    workload: Workload,
    estimate_learned: bool | None = None,
    zone: tzinfo = UTC,
    now: datetime | None = None,
    *,
    seen: SeesNames,
    units: Mapping[str, str],
) -> str:
    """One sentence on where the workload stands: why it waits, its position and estimated
    start (work that never fits has neither, and says why once: "Never fits: <why> ...",
    ``never_fits_reason``; as a gang that waits for its pods does, ``pods_waited_for``; an
    estimate before ``now``, the
    pool's clock, is due: said so, not as a time to come); or since when it runs; or how it
    ended (``preempted_summary``). Its moments read in ``zone``: UTC for the API and the
    CLI, the viewer's zone on the workload page (as its tables). Another team's workload
    its sentence names is unnamed to a reader ``seen`` who may not see it (``sentence``);
    its quantities in the flavors' ``units``."""
    from gpupool.control.estimates import refresh_words  # (it imports this module)

    state = workload.state
    if state == WorkloadState.PENDING:
        if not workload.pending_reason:  # the core has not looked at it, or will not
            refused = current_sentence(workload, seen=seen, units=units, zone=zone).strip()
            return refused or "Waiting for the next scheduling cycle to look at it."
        said = (
            current_sentence(workload, seen=seen, units=units, zone=zone).strip()
            or f"Pending: {workload.pending_reason}."
        )
        if never_fits(workload.pending_facts):
            return (
                f"Never fits: {never_fits_reason(said)} It has no place in the queue and no "
                "estimated start until its queue's quota or the pool changes."
            )
        parts = [said]
        reason, facts = workload.pending_reason, workload.pending_facts or {}
        if missing := pods_waited_for(reason, facts):  # no position, no estimate to give
            parts.append(
                f"No position and no estimated start: it waits for its pods ({missing} not "
                "created yet)."
            )
            return " ".join(parts)
        if workload.queue_position is not None and not (  # the sentence says it already
            facts and reason in get_args(PendingReason) and says_position(reason, facts)
        ):
            parts.append(f"Position {workload.queue_position} in queue {workload.queue.name}.")
        if workload.estimated_start_at is not None:
            basis = (
                " (from runtimes learned from similar work)"
                if estimate_learned
                else " (from declared runtimes)"
                if estimate_learned is False
                else ""
            )
            estimated = _when(workload.estimated_start_at, zone)
            if now is not None and workload.estimated_start_at < now:
                parts.append(
                    f"Estimated start: due now (estimated for {estimated}{basis}; estimates "
                    f"are refreshed {refresh_words()})."
                )
            else:
                parts.append(f"Estimated start: {estimated}{basis}.")
        elif (not_before := not_before_of(workload)) is not None:
            if now is not None and not_before < now:
                parts.append(
                    f"No estimated start yet: the last estimate looked ahead to "
                    f"{_when(not_before, zone)}, which has passed (estimates are refreshed "
                    f"{refresh_words()})."
                )
            else:
                parts.append(
                    f"No estimated start yet: not before {_when(not_before, zone)} (the "
                    "estimate looks only so far ahead)."
                )
        else:
            parts.append("No estimated start yet: what it waits for has no expected end.")
        return " ".join(parts)
    if state == WorkloadState.ADMITTED:
        return f"Admitted at {_when(workload.admitted_at, zone)}; its pods are starting."
    if state == WorkloadState.RUNNING:
        return f"Running since {_when(workload.started_at or workload.admitted_at, zone)}."
    if state == WorkloadState.PREEMPTED:
        return preempted_summary(workload, zone)
    return f"{state.capitalize()} at {_when(workload.finished_at, zone)}."


def preempted_summary(workload: Workload, zone: tzinfo = UTC) -> str:
    """Where a preempted workload stands: requeued with its original submit time, unless it
    ends there -- reclaimed for idleness (the core's ``lifecycle.ENDING_REASONS``: it would
    only sit idle again), or a bare pod, which nothing makes again (DESIGN 2, 4; the control
    loop's ``sync`` requeues the rest at once). Reads its preemptions (prefetched by
    ``workload_story``; else one query). Its moment reads in ``zone`` (``summary``). A drain
    that evicted it says which node, who drained it and why (``eviction_drains``: one more
    query, only for an admin eviction)."""
    events = list(workload.preempted_by.all())
    last = max(events, key=lambda event: (event.at, event.pk)) if events else None
    when = f" at {_when(last.at, zone)}" if last is not None else ""
    if last is not None and last.reason in ENDING_REASONS:
        return (
            f"Reclaimed{when}: its GPUs sat idle past its idle timeout. It ends here and is "
            "not requeued (it would only sit idle again)."
        )
    drain = ""
    if last is not None and last.reason == "admin":
        drain = eviction_drain_words(eviction_drains(workload, [last]).get(last.pk, ()))
    if workload.origin == Origin.BARE:
        why = f" ({reason_words(last.reason)})" if last is not None and not drain else ""
        return (
            f"Preempted{when}{why}{' ' + drain if drain else ''}. A bare pod is gone once "
            "evicted, so it ends here and is not requeued."
        )
    if drain:
        return f"Preempted{when} {drain}; it goes back to its queue with its original submit time."
    return "Preempted; it goes back to its queue with its original submit time."


def reason_words(reason: str) -> str:
    """A preemption's reason in words without parentheses of its own, so that a sentence can
    put it in one pair: ``admin: drain or manual eviction``, ``preempt: a higher-priority
    workload needed the GPUs``, ``node failure`` (the label ``PreemptionReason`` gives, whose
    explanation is in parentheses: "Preempted at ... (admin (drain or manual eviction))" read
    them twice)."""
    label = str(PreemptionReason(reason).label) if reason in PreemptionReason.values else reason
    code, sep, said = label.partition(" (")
    return f"{code}: {said.removesuffix(')')}" if sep else label


def transition_reason(to_state: str, reason: str) -> str:
    """Why a workload moved to ``to_state``, as the API, the CLI and its page say it: the
    recorded reason without a first word that repeats the state ("admitted: quota and capacity
    allow it" is the reason of a move to admitted, read as "pending -> admitted: quota and
    capacity allow it", not "... admitted: admitted: ...")."""
    return reason.removeprefix(f"{to_state}: ") or reason


def lost_gpu_hours(events: Iterable[PreemptionEvent]) -> Decimal:
    """GPU-hours of progress the preemptions cost, in total."""
    return sum((event.lost_gpu_hours for event in events), Decimal(0))


# The audit actions that start and end a node's drain (``inventory.actions.do_drain_node``,
# ``do_end_drain``): the node's row keeps only when its drain was asked, the audit row who
# asked and why.
DRAIN_ACTIONS = ("inventory.drain_node", "inventory.end_drain")


@dataclass(frozen=True, slots=True)
class EvictionDrain:
    """A node's drain that explains an eviction for ``admin``: the node, who asked (their
    username; "the system" for none) and why, and when."""

    node: str
    by: str
    reason: str
    at: datetime
    # Matched on a node the victim is recorded to have run on (``PreemptionEvent.nodes``),
    # not guessed among its flavors' nodes (events recorded before the nodes were kept).
    exact: bool = False

    def words(self) -> str:
        """The drain in one phrase: "node gpu-3, drained by alice: firmware update"."""
        why = f": {self.reason}" if self.reason.strip() else " (no reason given)"
        return f"node {self.node}, drained by {self.by}{why}"


def node_drains(
    evictions: Iterable[tuple[int, str, datetime, Sequence[str]]],
) -> dict[int, tuple[EvictionDrain, ...]]:
    """The drains that explain admin evictions recorded with their victims' nodes:
    ``evictions`` as (event id, reason, decided at, node names), any number of workloads'
    (a list's rows). For each admin one, the drains (audit rows ``DRAIN_ACTIONS``: who asked
    and why) of its own nodes in force when it was decided -- asked at or before it and not
    ended by then -- by the event's id; an event no drain explains, or with no nodes (recorded
    before they were kept: ``eviction_drains`` guesses those), is left out. One query of audit
    rows, none when no event is such an eviction. The audit rows name the node as it was
    called then (``object_repr``), as the event does."""
    from gpupool.audit.models import AuditEvent

    admin = [
        (pk, at, set(nodes)) for pk, reason, at, nodes in evictions if reason == "admin" and nodes
    ]
    if not admin:
        return {}
    history = list(
        AuditEvent.objects.filter(
            object_type="inventory.node",
            action__in=DRAIN_ACTIONS,
            at__lte=max(at for _, at, _ in admin),
            object_repr__in=sorted(set().union(*(nodes for _, _, nodes in admin))),
        )
        .order_by("at", "id")
        .values_list("object_repr", "action", "at", "actor_name", "reason")
    )
    found: dict[int, tuple[EvictionDrain, ...]] = {}
    for pk, decided, nodes in admin:
        in_force: dict[str, EvictionDrain] = {}
        for node, action, at, actor, reason in history:
            if at > decided:
                break
            if node not in nodes:
                continue
            if action != DRAIN_ACTIONS[0]:
                in_force.pop(node, None)
            else:
                in_force.setdefault(
                    node, EvictionDrain(node, actor or "the system", reason, at, exact=True)
                )
        if in_force:
            found[pk] = tuple(sorted(in_force.values(), key=lambda drain: drain.node))
    return found


def drain_words_of(names: Iterable[str]) -> dict[str, str]:
    """For workloads being evicted for ``admin`` (``namespace/name``), the drain that caused
    each eviction in words (``eviction_drain_words``: "for the drain of node h100-04, drained
    by ada: swap PSU"), from its latest admin preemption event and the nodes recorded with
    it (``node_drains``); a name no drain explains is left out. Two queries, whatever the
    number. Apply tells the evicted pods (their ``Preempted`` Event) what the pages say."""
    keys = {tuple(name.split("/", 1)) for name in names if "/" in name}
    if not keys:
        return {}
    which = Q()
    for namespace, name in keys:
        which |= Q(victim__namespace=namespace, victim__name=name)
    latest: dict[str, tuple[int, str, datetime, Sequence[str]]] = {}
    for pk, at, nodes, namespace, name in (
        PreemptionEvent.objects.filter(which, reason="admin")
        .order_by("at", "id")
        .values_list("pk", "at", "nodes", "victim__namespace", "victim__name")
    ):
        latest[f"{namespace}/{name}"] = (pk, "admin", at, tuple(nodes or ()))
    drains = node_drains(latest.values())
    found = {name: eviction_drain_words(drains.get(event[0], ())) for name, event in latest.items()}
    return {name: words for name, words in found.items() if words}


def eviction_drains(
    workload: Workload, events: Sequence[PreemptionEvent]
) -> dict[int, tuple[EvictionDrain, ...]]:
    """The drains that explain each of ``events`` evicted for ``admin`` (by the event's id;
    an event no drain explains is left out): the drains (audit rows ``DRAIN_ACTIONS``, which
    say who asked and why) in force when the eviction was decided -- asked at or before it
    and not ended by then -- on the nodes the workload is placed on, or, once its placements
    are gone (an evicted workload holds none), on the nodes of the flavors its pod sets run
    on; not a drain still going that was asked before the workload was last admitted (a
    draining node is cordoned: it was not placed there). The drains' audit rows, the
    evictions and the node's ``drain_requested_at`` are all on the pool's clock (a person's
    change is audited on it, ``audit.actions.record_audit_event``), so they compare. Reads
    its pod sets, placements and transitions as prefetched (``workload_story``) and one
    query of audit rows, none when no event is an admin eviction."""
    from django.db.models import CharField, OuterRef, Subquery
    from django.db.models.functions import Cast

    from gpupool.audit.models import AuditEvent
    from gpupool.inventory.models import Node

    found = node_drains((e.pk, e.reason, e.at, e.nodes) for e in events)
    # Events recorded with their nodes are matched on them alone (``node_drains``).
    admin = [event for event in events if event.reason == "admin" and not event.nodes]
    if not admin:
        return found
    keyed = Node.objects.annotate(key=Cast("pk", CharField()))
    rows = AuditEvent.objects.filter(
        object_type="inventory.node",
        action__in=DRAIN_ACTIONS,
        at__lte=max(event.at for event in admin),
    )
    placed = {placement.node_id for placement in workload.placements.all()}
    if placed:
        rows = rows.filter(object_id__in=[str(pk) for pk in placed])
    else:
        flavors = {
            flavor_id
            for pod_set in workload.pod_sets.all()
            for flavor_id in (
                pod_set.flavor_id,
                *(choice.flavor_id for choice in pod_set.flavor_choices.all()),
            )
            if flavor_id is not None
        }
        if not flavors:
            return found
        rows = rows.filter(object_id__in=keyed.filter(flavor_id__in=flavors).values("key"))
    current = keyed.filter(key=OuterRef("object_id")).values("drain_requested_at")[:1]
    history = list(
        rows.annotate(draining_since=Subquery(current))
        .order_by("at", "id")
        .values_list(
            "object_id", "object_repr", "action", "at", "actor_name", "reason", "draining_since"
        )
    )
    admissions = [
        move.at for move in workload.transitions.all() if move.to_state == WorkloadState.ADMITTED
    ]
    for event in admin:
        placed_at = max((at for at in admissions if at <= event.at), default=None)
        in_force: dict[str, EvictionDrain] = {}
        for node_id, node, action, at, actor, reason, since in history:
            if at > event.at:
                break
            if action != DRAIN_ACTIONS[0]:
                in_force.pop(node_id, None)
            elif placed_at is not None and since is not None and since < placed_at:
                in_force.pop(node_id, None)  # draining since before it was placed
            else:
                in_force.setdefault(node_id, EvictionDrain(node, actor or "the system", reason, at))
        if in_force:
            found[event.pk] = tuple(sorted(in_force.values(), key=lambda drain: drain.node))
    return found


def timeline_drain_words(
    moves: Sequence[WorkloadTransition],
    events: Sequence[PreemptionEvent],
    drains: Mapping[int, Sequence[EvictionDrain]],
) -> list[str]:
    """For each of ``moves`` (a workload's transitions, oldest first), the drain that caused
    it in words (``eviction_drain_words``), "" for most: a move to preempted for ``admin``
    ("evicted (admin)") follows the last admin eviction decided at or before it, and
    ``drains`` (``eviction_drains``) says which drain that was."""
    admin = sorted((e for e in events if e.reason == "admin"), key=lambda e: (e.at, e.pk))
    words = []
    for move in moves:
        said = ""
        if move.to_state == WorkloadState.PREEMPTED and move.reason.startswith("evicted (admin)"):
            decided = [event for event in admin if event.at <= move.at]
            if decided:
                said = eviction_drain_words(drains.get(decided[-1].pk, ()))
        words.append(said)
    return words


def eviction_drain_words(drains: Sequence[EvictionDrain]) -> str:
    """Which drain evicted the workload, in words ("" for none): "for the drain of node gpu-3,
    drained by alice: firmware update", or of one of several nodes of its flavors drained at
    that moment."""
    if not drains:
        return ""
    if len(drains) == 1:
        return f"for the drain of {drains[0].words()}"
    which = "its nodes" if all(drain.exact for drain in drains) else "one of its flavors' nodes"
    return f"for the drain of {which}: " + "; ".join(drain.words() for drain in drains)


# ----------------------------------------------------------------------------- dry-run


@dataclass(frozen=True)
class Submission:
    """What a person asks to run, as ``do_submit_workload`` takes it."""

    name: str
    queue: Any
    pod_sets: Sequence[PodSetSpec]
    namespace: str | None = None
    priority_class: Any = None
    min_member: int | None = None
    topology: str = ""
    protected_runtime_s: int | None = None
    expected_runtime_s: int | None = None

    def submit(self, *, submitter: Any) -> Workload:
        """Queue it through the action."""
        return do_submit_workload(
            self.name,
            queue=self.queue,
            pod_sets=self.pod_sets,
            namespace=self.namespace,
            priority_class=self.priority_class,
            min_member=self.min_member,
            topology=self.topology,
            protected_runtime_s=self.protected_runtime_s,
            expected_runtime_s=self.expected_runtime_s,
            submitter=submitter,
        )


@dataclass(frozen=True)
class DryRunLayer:
    """One layer of a dry-run (quota, capacity, placement): passes, and if not, why."""

    layer: str
    passes: bool
    detail: str
    facts: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class DryRunAnswer:
    """Would the workload fit now, layer by layer, and on which cycle's view of the pool."""

    workload: str
    fits: bool
    first_failure: str | None
    layers: tuple[DryRunLayer, ...]
    cycle_id: int | None
    snapshot_at: datetime
    never_fits: str = ""  # why it could never run as the pool is set up ("" when it could)


class _Checked(Exception):
    """Carries the core's view of a validated submission out of its rolled-back savepoint."""

    def __init__(self, info: WorkloadInfo) -> None:
        super().__init__(info.name)
        self.info = info


def _core_workload(workload: Workload, specs: Sequence[PodSetSpec], at: float) -> WorkloadInfo:
    """A submitted (not yet saved for good) workload as the core sees a pending one."""
    pod_sets = tuple(
        pod_set_info(
            spec.count,
            spec.gpus,
            spec.gpu_milli,
            _flavor_names(spec),
            Decimal(str(spec.cpu)),
            Decimal(str(spec.memory_gb)),
        )
        for spec in specs
    )
    return WorkloadInfo(
        name=workload.qualified_name(),
        queue=workload.queue.name,
        priority_class=workload.priority_class.name,
        pod_sets=pod_sets,
        submitted_at=at,
        min_member=workload.min_member,
        topology=core_topology(workload.topology),
        protected_runtime_s=float(workload.protected_runtime_s),
        expected_runtime_s=(
            None if workload.expected_runtime_s is None else float(workload.expected_runtime_s)
        ),
    )


def _flavor_names(spec: PodSetSpec) -> tuple[str, ...]:
    """The pod set's flavors in order: its first, then its further choices."""
    if spec.flavor is None:
        return ()
    return (spec.flavor.name, *(choice.name for choice in spec.flavor_choices))


def dry_run_submission(
    submission: Submission, *, submitter: Any, seen: NamesSeen | AsWritten
) -> DryRunAnswer:
    """Quota, then capacity, then placement for a workload that is not submitted: checked by
    the same action as a submission (inside a savepoint that is rolled back, so nothing is
    written), then answered by the core on the last cycle's snapshot (its sentences in the
    snapshot's units). Its layers' facts and sentences as the caller ``seen`` may see them
    (``facts_seen_by``: the capacity held for another team's workload is not named); as the
    core said them for ``AS_WRITTEN``."""
    _said_who_reads(seen)
    view = pool_snapshot()
    database = view.value
    try:
        with transaction.atomic():
            workload = submission.submit(submitter=submitter)
            raise _Checked(_core_workload(workload, submission.pod_sets, database.now))
    except _Checked as checked:
        info = checked.info
    snapshot = database.snapshot
    _require_known(info, snapshot.queues, snapshot.flavors, snapshot.priority_classes)
    try:
        answer = dry_run(snapshot, pool_policy(), database.now, info)
    except ValueError as error:
        raise ValidationError({"name": str(error).removeprefix("name: ")}) from None
    layers = tuple(
        DryRunLayer(
            layer.layer,
            layer.passes,
            sentence_seen_by(layer.detail, layer.facts, seen),
            dict(layer.facts if isinstance(seen, AsWritten) else facts_seen_by(layer.facts, seen)),
        )
        for layer in answer.layers
    )
    return DryRunAnswer(
        workload=answer.workload,
        fits=answer.first_failure is None,
        first_failure=answer.first_failure,
        layers=layers,
        cycle_id=view.cycle_id,
        snapshot_at=view.at,
        never_fits=answer.never,
    )


def _require_known(
    info: WorkloadInfo, queues: Iterable[Any], flavors: Iterable[Any], classes: Iterable[Any]
) -> None:
    """Refuse names the last cycle's snapshot does not have yet (created since), by field."""
    newer = "is newer than the last scheduling cycle; ask again after the next one"
    if info.queue not in {queue.name for queue in queues}:
        raise ValidationError({"queue": f"queue {info.queue} {newer}"})
    if info.priority_class not in {c.name for c in classes}:
        raise ValidationError({"priority_class": f"class {info.priority_class} {newer}"})
    known = {flavor.name for flavor in flavors}
    for index, pod_set in enumerate(info.pod_sets):
        for name in pod_set.flavors:
            if name not in known:
                raise ValidationError({f"pod_sets.{index}.flavor": f"flavor {name} {newer}"})


# ----------------------------------------------------------------------------- contracts


@dataclass(frozen=True, slots=True)
class BackoffInForce:
    """A team whose work caused too many preemptions lately: its pending work is treated one
    priority step lower until ``ends_at``."""

    tenant: str
    caused: int
    ends_at: datetime


@dataclass(frozen=True, slots=True)
class ProtectionInForce:
    """A workload evicted often lately: once it runs again it is protected a while longer."""

    workload: Workload
    evictions: int
    protected_s: float


def backoffs_in_force(now: datetime, policy: BackoffPolicy | None) -> list[BackoffInForce]:
    """The teams backed off at ``now`` by the core's own rule (``contracts.backoff_ends``)
    over the preemptions they caused, by team name. Teams see each other at this level."""
    if policy is None:
        return []
    since = now - timedelta(seconds=policy.window_s + policy.cooldown_s)
    times: dict[str, list[float]] = {}
    for tenant, at in PreemptionEvent.objects.filter(
        at__gte=since, at__lte=now, preemptor_tenant__isnull=False
    ).values_list("preemptor_tenant__name", "at"):
        times.setdefault(tenant, []).append(at.timestamp())
    found = []
    for tenant, moments in sorted(times.items()):
        ends = backoff_ends(moments, policy, now.timestamp())
        if ends is not None:
            found.append(BackoffInForce(tenant, len(moments), datetime.fromtimestamp(ends, UTC)))
    return found


def protections_in_force(
    events: QuerySet[PreemptionEvent], now: datetime, policy: VictimProtectionPolicy | None
) -> list[ProtectionInForce]:
    """The workloads among ``events``' victims evicted at least the policy's number of times
    within its window before ``now`` (the core's victim protection), most evicted first."""
    if policy is None:
        return []
    recent = (
        events.filter(at__gte=now - timedelta(seconds=policy.window_s), at__lte=now)
        .values("victim")
        .annotate(n=Count("id"))
        .filter(n__gte=policy.evictions)
    )
    counts = {row["victim"]: row["n"] for row in recent}
    victims = _with_names().filter(pk__in=list(counts)).order_by("namespace", "name")
    return sorted(
        (ProtectionInForce(w, counts[w.pk], policy.protected_s) for w in victims),
        key=lambda p: -p.evictions,
    )
