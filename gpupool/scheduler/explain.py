"""Explanations: one structured reason per pending workload, and a sentence for people.

A verdict is a value: the reason code of the first layer that stopped the workload and the
facts behind it (queue, flavor, asked, available ...). The sentence people read -- the plan's
``detail``, which the ``plan`` command prints -- is built here from those facts only (and
the units of the flavors they name), so whatever shows a reason shows the same one. Where a
guarantee on the workload's path was scaled down to what the pool's healthy GPUs can back
(``quota.scale_guarantees``), the facts carry ``scaled_guarantee`` and the sentence says so.

Quantities of a flavor are said in its unit (``flavor_amount``): a MIG flavor's count MIG
instances, any other's GPUs -- what a flavor is comes from the snapshot (``flavor_units``,
the one argument a sentence takes beside the facts). Times are said as people read them, as
the pages and the CLI write them in UTC (``when``); the facts keep their POSIX seconds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, cast, get_args

from gpupool.scheduler.quota import QuotaShortfall, ScaledGuarantee
from gpupool.scheduler.types import MILLI, FlavorInfo, PendingExplanation, PendingReason


@dataclass(frozen=True, slots=True)
class Verdict:
    """Why one attempt did not admit a workload."""

    reason: PendingReason
    facts: Mapping[str, object] = field(default_factory=dict)


# The fact by which enqueue sets a workload aside: a capability on its path, or the pool's
# healthy GPUs or nodes, could never hold it, however idle the pool (``cycle.enqueue``).
NEVER_FITS_FACT = "never_fits"

# The facts of a workload bound to one NVLink domain (``topology: domain``) that waits on
# placement: its topology, and the most GPUs of its flavor free inside any one domain -- what
# it could use, where the flavor's ``free_gpus`` count GPUs scattered over every domain.
TOPOLOGY_FACT = "topology"
IN_ONE_DOMAIN_FACT = "free_in_one_domain_gpus"


# The flavor whose deserved share a workload's queue lent (``cycle.lent_facts``, beside
# ``lent_gpus``): what the lent amount counts.
LENT_FLAVOR_FACT = "lent_flavor"


# The flavors a never-fitting workload may use, in its choices' order, when every one of them
# gives the same verdict (``across_flavors``): its sentence names them all, where ``flavor``
# (kept: what the pages and the loop read) names the first.
FLAVORS_FACT = "flavors"


def across_flavors(verdicts: Sequence[Verdict]) -> Verdict:
    """One verdict for a workload that each of its flavor choices stops (``verdicts``: one per
    choice, most preferred first): the first, and where every choice gives the same verdict
    but for its flavor (a node selector no node of any of them matches), with every flavor
    named (``FLAVORS_FACT``): "no h100 or gb200 node matches", not only the first's. Verdicts
    that differ in more than their flavor keep the first's words (its numbers are its own)."""
    first = verdicts[0]
    flavors: list[str] = []
    for verdict in verdicts:
        flavor = verdict.facts.get("flavor")
        if verdict.reason != first.reason or not isinstance(flavor, str):
            return first
        if _without_flavor(verdict.facts) != _without_flavor(first.facts):
            return first
        if flavor not in flavors:
            flavors.append(flavor)
    if len(flavors) < 2:
        return first
    return Verdict(first.reason, {**first.facts, FLAVORS_FACT: flavors})


def _without_flavor(facts: Mapping[str, object]) -> dict[str, object]:
    return {key: value for key, value in facts.items() if key not in ("flavor", FLAVORS_FACT)}


def _flavors_of(facts: Mapping[str, object]) -> object:
    """The flavor a verdict names, or the list of all it names (``FLAVORS_FACT``)."""
    named = facts.get(FLAVORS_FACT)
    if isinstance(named, list) and len(named) > 1:
        return named
    return facts.get("flavor")


def _flavor_text(flavor: object) -> str:
    """A flavor's name, or a list of them: ``h100``, ``h100 or gb200``, ``h100, gb200 or
    l40s``."""
    if isinstance(flavor, list) and flavor:
        names = [str(name) for name in flavor]
        return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
    return str(flavor)


def flavor_words(facts: Mapping[str, object]) -> str:
    """The flavor a verdict names, or all it names (``FLAVORS_FACT``): ``h100``,
    ``h100 or gb200``, ``h100, gb200 or l40s``."""
    return _flavor_text(_flavors_of(facts))


def never_fits(facts: Mapping[str, object]) -> bool:
    """Whether a verdict's facts say the work can never run as the pool and queues are set
    up: it has no place in its queue's order and no estimated start, and a replay (the
    estimates, a what-if) leaves it out."""
    return bool(facts.get(NEVER_FITS_FACT))


def when(value: object) -> str:
    """A time for sentences, as people read one and as the pages and the CLI write it in
    UTC: ``2026-12-08 15:03 UTC`` (to the minute). The facts keep POSIX seconds (the pages
    show them in the viewer's zone); ``?`` when missing or not a time. The one way the core
    says a time in a sentence."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "?"
    try:
        moment = datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):  # out of the calendar, or not a number
        return "?"
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def number(value: object) -> str:
    """A count for sentences: ``8``, ``0.47``, ``?`` when missing."""
    return f"{value:g}" if isinstance(value, int | float) else "?"


def counted(amount: str, one: str, many: str) -> str:
    """A count as ``number`` writes it with its noun: ``one`` for exactly 1, else ``many``
    ("1 h100 GPU", "0 h100 GPUs", "? GPUs")."""
    return f"{amount} {one if amount == '1' else many}"


# What a flavor's quantities count, in the product's words (``gpupool.inventory.units``: the
# pages, the API and the CLI say the same): a MIG flavor's are its MIG instances, never added
# to GPUs; any other flavor's are GPUs (whole, or shared in milli-GPU). Singular; the plural
# adds an "s".
GPU_UNIT: Final = "GPU"
MIG_UNIT: Final = "MIG instance"
# Flavor name -> its unit (``flavor_units``); a flavor it does not name counts GPUs.
NO_UNITS: Final[Mapping[str, str]] = {}


def flavor_units(flavors: Iterable[FlavorInfo]) -> dict[str, str]:
    """The unit of each MIG flavor of ``flavors`` (``FlavorInfo.mig``), by name: what the
    sentences count its quantities in (the others count GPUs, and are left out). Built once
    per cycle or dry-run, from the snapshot; a reader that says a verdict again passes the
    same mapping (``gpupool.inventory.units.flavor_units`` gives it from the database)."""
    return {flavor.name: MIG_UNIT for flavor in flavors if flavor.mig is not None}


def unit_of(flavor: object, units: Mapping[str, str]) -> str:
    """The unit of a flavor the facts name (``units``: ``flavor_units``), or of a list of
    flavors: MIG instances only where each is a MIG flavor, else GPUs (the pages' rule for a
    workload of several flavors); GPUs for none."""
    if isinstance(flavor, str):
        return units.get(flavor, GPU_UNIT)
    names: list[object] = flavor if isinstance(flavor, list) else []
    if names and all(units.get(str(name), GPU_UNIT) == MIG_UNIT for name in names):
        return MIG_UNIT
    return GPU_UNIT


def flavor_amount(
    amount: str,
    flavor: object,
    units: Mapping[str, str],
    what: str = "",
    named: bool = True,
) -> str:
    """``amount`` (as ``number`` writes it) of a flavor in its unit (``unit_of``), singular
    for exactly 1: the one way a sentence states a quantity of a flavor. "8 h100 GPUs",
    "1 a100-3g.40gb MIG instance", "3 healthy free h100 GPUs" (``what``), "16 healthy GPUs"
    (``named`` False: the sentence names the flavor elsewhere); ``flavor`` None: "2 GPUs"."""
    words = [what] if what else []
    if named and flavor is not None:
        words.append(_flavor_text(flavor))
    words.append(unit_of(flavor, units))
    noun = " ".join(words)
    return counted(amount, noun, noun + "s")


def _is_are(amount: str) -> str:
    return "is" if amount == "1" else "are"


def flavors_named(facts: Mapping[str, object]) -> set[str]:
    """Every flavor a verdict's facts name, nested facts too (a budget's ``then_facts``, a
    ``scaled_guarantee``) and the flavor of a lent share (``lent_flavor``): the flavors a
    reader needs the units of (``flavor_units``) to say the verdict again."""
    found: set[str] = set()
    for key in ("flavor", LENT_FLAVOR_FACT):
        name = facts.get(key)
        if isinstance(name, str):
            found.add(name)
    named = facts.get(FLAVORS_FACT)
    if isinstance(named, list):
        found.update(str(name) for name in named)
    for key in ("then_facts", "scaled_guarantee"):
        nested = facts.get(key)
        if isinstance(nested, Mapping):
            found |= flavors_named(nested)
    return found


def waiting_verdict(victims: Mapping[str, str], held_nodes: Sequence[str] = ()) -> Verdict:
    """The verdict of a preemptor whose victims (name -> queue) are leaving.

    The facts name the victims, for admins; the sentence the preemptor's owner reads says
    only how many of which queue (another tenant's workload names are not theirs to see).
    """
    facts: dict[str, object] = {
        "victims": sorted(victims),
        "victim_queues": dict(sorted(Counter(victims.values()).items())),
    }
    if held_nodes:
        facts["held_nodes"] = list(held_nodes)
    return Verdict("waiting-for-preemption", facts)


def quota_verdict(shortfall: QuotaShortfall) -> Verdict:
    """The verdict for a request that does not pass quota."""
    return Verdict(
        "quota",
        {
            "queue": shortfall.queue,
            "flavor": shortfall.flavor,
            "asked_gpus": shortfall.asked / MILLI,
            "available_gpus": shortfall.available / MILLI,
            "borrowing_capped": shortfall.borrowing_capped,
            "never_fits": shortfall.never,
        },
    )


def with_scaled_guarantee(verdict: Verdict, scaled: ScaledGuarantee) -> Verdict:
    """The verdict with the facts of a guarantee on the workload's path that is scaled down
    because what backs it shrank (failed GPUs, cordoned nodes)."""
    facts = dict(verdict.facts)
    facts["scaled_guarantee"] = {
        "queue": scaled.queue,
        "flavor": scaled.flavor,
        "guarantee_gpus": scaled.guarantee / MILLI,
        "scaled_gpus": scaled.scaled / MILLI,
        "backed_by": scaled.backed_by,
        "backing_gpus": scaled.backing / MILLI,
        "guaranteed_gpus": scaled.guaranteed / MILLI,
    }
    return Verdict(verdict.reason, facts)


def _scaled_guarantee_sentence(facts: Mapping[str, object], units: Mapping[str, str]) -> str:
    flavor, backed_by = facts.get("flavor"), facts.get("backed_by")
    backing, guaranteed = number(facts.get("backing_gpus")), number(facts.get("guaranteed_gpus"))
    if backed_by is None:
        why = (
            f"the pool's {flavor_amount(backing, flavor, units, 'healthy')} cannot back the "
            f"{guaranteed} guaranteed"
        )
    else:
        why = (
            f"the {flavor_amount(backing, flavor, units)} guaranteed to {backed_by} cannot "
            f"back the {guaranteed} guaranteed under it"
        )
    return (
        f"Queue {facts.get('queue')}'s guarantee of "
        f"{flavor_amount(number(facts.get('guarantee_gpus')), flavor, units)} is scaled down "
        f"to {number(facts.get('scaled_gpus'))} while {why}."
    )


def _quota_sentence(facts: Mapping[str, object], units: Mapping[str, str]) -> str:
    queue, flavor = facts.get("queue"), facts.get("flavor")
    asked, available = number(facts.get("asked_gpus")), number(facts.get("available_gpus"))
    if facts.get("never_fits"):
        return (
            f"Queue {queue} can never hold {flavor_amount(asked, flavor, units)}: the "
            f"capabilities on its path allow {available}."
        )
    text = (
        f"Queue {queue} has {flavor_amount(available, flavor, units)} of quota available, "
        f"{asked} asked"
    )
    if facts.get("borrowing_capped"):
        text += "; borrowing is capped by its capability"
    else:
        text += "; the cohort has no more idle quota to lend"
    return text + "."


# The unit of a resource other than GPUs (``flavor_amount`` says those), for one and for
# more than one.
_UNITS = {
    "cpu": ("CPU core on {flavor} nodes", "CPU cores on {flavor} nodes"),
    "memory": ("GB of memory on {flavor} nodes", "GB of memory on {flavor} nodes"),
}


def _domain_never_sentence(facts: Mapping[str, object], units: Mapping[str, str]) -> str:
    """A gang bound to one NVLink domain that asks more than the flavor's largest domain
    holds (``largest_domain_gpus``)."""
    largest = number(facts.get("largest_domain_gpus"))
    return (
        f"It can never run as asked: it must sit in one NVLink domain, and the largest "
        f"{flavor_words(facts)} domain has "
        f"{flavor_amount(largest, _flavors_of(facts), units, 'healthy', named=False)}; it "
        f"asks {number(facts.get('asked'))}."
    )


def _capacity_sentence(facts: Mapping[str, object], units: Mapping[str, str]) -> str:
    if facts.get("no_nodes"):
        return "The pool has no node of a flavor it may run on."
    flavor = flavor_words(facts)
    flavors = _flavors_of(facts)
    if "allowed_nodes" in facts:
        if not facts.get("allowed_nodes"):
            return (
                f"It can never run as asked: no {flavor} node matches its node selector, "
                "node affinity and tolerations."
            )
        allowed = number(facts.get("allowed_nodes"))
        healthy = flavor_amount(
            number(facts.get("allowed_gpus")), flavors, units, "healthy", named=False
        )
        nodes = counted(allowed, f"{flavor} node", f"{flavor} nodes")
        return (
            f"It can never run as asked: the {nodes} its node selector, node affinity and "
            "tolerations allow "
            f"{'has' if allowed == '1' else 'have'} "
            f"{healthy}; it asks {number(facts.get('asked'))}."
        )
    if facts.get("any_node"):
        one, many = (
            ("GB of memory", "GB of memory")
            if facts.get("resource") == "memory"
            else ("CPU core", "CPU cores")
        )
        return (
            "It may run on any node, but no kind of node has "
            f"{counted(number(facts.get('asked')), one, many)} free: the most is "
            f"{number(facts.get('free'))} on {facts.get('flavor')} nodes."
        )
    if "largest_domain_gpus" in facts:  # ``topology`` now; as explanations written before say
        return _domain_never_sentence(facts, units)
    if "largest_pod_gpus" in facts:
        return (
            "It can never run as asked: no node has "
            f"{flavor_amount(number(facts.get('asked_pod_gpus')), flavors, units, 'healthy')} "
            "for one pod; the largest has "
            f"{number(facts.get('largest_pod_gpus'))}."
        )
    resource = str(facts.get("resource", "gpu"))
    key, what = ("healthy", "healthy") if facts.get("never_fits") else ("free", "healthy free")
    amount = number(facts.get(key))
    if resource == "gpu":
        said = flavor_amount(amount, flavors, units, what)
    else:
        one, many = _UNITS.get(resource, ("{flavor}", "{flavor}"))
        said = counted(
            amount, f"{what} {one.format(flavor=flavor)}", f"{what} {many.format(flavor=flavor)}"
        )
    if facts.get("never_fits"):
        return f"The pool has only {said}; {number(facts.get('asked'))} asked."
    return f"The pool has {said}, {number(facts.get('asked'))} asked."


def sentence(verdict: Verdict, position: int, units: Mapping[str, str] = NO_UNITS) -> str:
    """The human sentence for a verdict, each flavor's quantities in its unit (``units``:
    ``flavor_units`` of the snapshot; a flavor it does not name counts GPUs)."""
    text = _reason_sentence(verdict, position, units)
    scaled = verdict.facts.get("scaled_guarantee")
    if isinstance(scaled, dict):
        text += " " + _scaled_guarantee_sentence(scaled, units)
    return text


def _reason_sentence(verdict: Verdict, position: int, units: Mapping[str, str]) -> str:
    """The sentence for the verdict's reason."""
    facts = verdict.facts
    reason = verdict.reason
    if reason == "budget":
        then = facts.get("then")
        then_facts = facts.get("then_facts")
        after = ""
        if isinstance(then, str) and then in get_args(PendingReason):
            layer = Verdict(
                cast(PendingReason, then), then_facts if isinstance(then_facts, dict) else {}
            )
            after = " " + sentence(layer, position, units)
        reserved = ""
        by = facts.get("reserved_by")
        if isinstance(by, list) and by:
            reserved = (
                f", {number(facts.get('reserved_gpu_hours'))} of them reserved by "
                f"{', '.join(map(str, by))} in this cycle"
            )
        return (
            f"Out of {facts.get('priority_class')} budget (tenant {facts.get('tenant')}: "
            f"{counted(number(facts.get('remaining_gpu_hours')), 'GPU-hour', 'GPU-hours')} "
            f"left{reserved}; "
            f"{number(facts.get('reservation_gpu_hours'))} needed to reserve its protected "
            f"window): it competes at the default class.{after}"
        )
    if reason == "quota":
        return _quota_sentence(facts, units)
    if reason == "capacity":
        return _capacity_sentence(facts, units)
    if reason == "fragmentation":
        return _fragmentation_sentence(facts, units)
    if reason == "topology":
        if "largest_domain_gpus" in facts:  # never: no domain of the flavor is large enough
            return _domain_never_sentence(facts, units)
        most = ""
        if IN_ONE_DOMAIN_FACT in facts:
            amount = number(facts.get(IN_ONE_DOMAIN_FACT))
            free = flavor_amount(amount, facts.get("flavor"), units)
            most = f" (at most {free} {_is_are(amount)} free in one)"
        return (
            f"No single NVLink domain holds its {counted(number(facts.get('pods')), 'pod', 'pods')}"
            f"{most}; it would fit across domains, but it requires one."
        )
    if reason == "gang":
        missing = number(facts.get("missing_pods"))
        return f"{missing} of its pods {'does' if missing == '1' else 'do'} not exist yet."
    if reason == "waiting-for-preemption":
        nodes = facts.get("held_nodes")
        where = f" on {', '.join(map(str, nodes))}" if isinstance(nodes, list) and nodes else ""
        counts = facts.get("victim_queues")
        if isinstance(counts, dict) and counts:
            return (
                f"Evicting {_victims_by_queue(counts)} to make room; that capacity is held "
                f"for it{where}."
            )
        return f"Its victims are still leaving; the capacity they free is held for it{where}."
    blocker = facts.get("blocked_by")
    if blocker:
        return (
            f"Queue {facts.get('queue')} is served in strict FIFO order and {blocker}, ahead of "
            f"it, cannot be admitted yet: position {position}."
        )
    holder = facts.get("held_for")
    if holder and facts.get("held_because") == "nominated":
        return (
            f"Capacity is held for {holder}, which waits for the workloads it evicted to "
            f"leave: position {position}."
        )
    if holder:
        return (
            f"Capacity is held for {holder}, which has starved since "
            f"{when(facts.get('starving_since'))}: position {position}."
        )
    if facts.get("resource") == "quota":
        return (
            f"Work of other queues, served first, took the quota room it could use this cycle "
            f"(queue {facts.get('queue')} had it when the cycle began): "
            f"{flavor_amount(number(facts.get('free')), facts.get('flavor'), units)} of quota "
            "left, "
            f"{number(facts.get('asked'))} asked; position {position} in queue "
            f"{facts.get('queue')}."
        )
    return (
        f"Higher-ranked work holds the capacity it needs: position {position} in queue "
        f"{facts.get('queue')}."
    )


def _fragmentation_sentence(facts: Mapping[str, object], units: Mapping[str, str]) -> str:
    """Enough GPUs free in all, but not where the pods could use them: no node has room for a
    lone pod (its GPUs, or its share of one, ``gpu_share``, with its CPU and memory), or no
    set of nodes holds the gang. A gang bound to one NVLink domain is told the most free in
    one domain first (``IN_ONE_DOMAIN_FACT``), the GPUs it could use, when that is fewer."""
    flavor = facts.get("flavor")
    amount = number(facts.get("free_gpus"))
    free = f"{flavor_amount(amount, flavor, units)} {_is_are(amount)} free in all"
    most = number(facts.get(IN_ONE_DOMAIN_FACT))
    if facts.get(TOPOLOGY_FACT) == "domain" and most not in ("?", amount):
        free = (
            f"At most {flavor_amount(most, flavor, units)} {_is_are(most)} free in one NVLink "
            f"domain ({amount} in all)"
        )
    pods = facts.get("pods")
    share = facts.get("gpu_share")
    asks = "" if share is None else f" ({number(share)} of one GPU each)"
    if pods == 1:
        asks = "" if share is None else f" ({number(share)} of one GPU)"
        return f"{free}, but no node has room for its pod{asks} with its CPU and memory."
    placeable = number(facts.get("largest_placeable"))
    return (
        f"{free}, but no set of nodes holds the gang{asks}: at most {placeable} of its "
        f"{number(pods)} pods {'fits' if placeable == '1' else 'fit'} (minimum "
        f"{number(facts.get('minimum'))})."
    )


def _victims_by_queue(counts: Mapping[object, object]) -> str:
    """``2 workloads of queue team-b``; ``3 workloads (2 of queue a, 1 of queue b)``."""

    def workloads(count: object) -> str:
        return f"{number(count)} workload{'' if count == 1 else 's'}"

    if len(counts) == 1:
        ((queue, count),) = counts.items()
        return f"{workloads(count)} of queue {queue}"
    total = sum(c for c in counts.values() if isinstance(c, int))
    parts = ", ".join(f"{number(c)} of queue {q}" for q, c in counts.items())
    return f"{workloads(total)} ({parts})"


def duration(seconds: object) -> str:
    """A span for sentences: ``1 h``, ``30 min``, ``45 s``."""
    if not isinstance(seconds, int | float):
        return "?"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


_WHY_NOT_RECLAIMED = {
    "never": "its class never evicts",
    "not-reclaimable": "the queues using them are not reclaimable",
    "no-room": "taking back what may be taken would not make room for it",
}


def hidden_state(facts: Mapping[str, object], units: Mapping[str, str] = NO_UNITS) -> str:
    """Sentences for what else stands behind a verdict: a hold kept for the workload, lent
    quota that cannot be taken back (in the unit of the flavor lent, ``lent_flavor``),
    back-off."""
    out = ""
    nodes = facts.get("held_nodes")
    if facts.get("holding_capacity") and isinstance(nodes, list) and nodes:
        out += f" Capacity is being held for it on {', '.join(map(str, nodes))}."
    if "lent_gpus" in facts:
        why = facts.get("cannot_reclaim")
        if why == "protected":
            reason = f"their work is protected until {when(facts.get('reclaimable_at'))}"
        else:
            reason = _WHY_NOT_RECLAIMED.get(str(why), "?")
        lent_to = facts.get("lent_to")
        to = ""
        if isinstance(lent_to, list) and lent_to:
            others = facts.get("borrowers", len(lent_to))
            more = others - len(lent_to) if isinstance(others, int) else 0
            to = f" to {', '.join(map(str, lent_to))}" + (f" and {more} more" if more else "")
        lent = number(facts.get("lent_gpus"))
        lent_of = flavor_amount(lent, facts.get(LENT_FLAVOR_FACT), units, named=False)
        out += (
            f" Its queue lent {lent_of} of its share{to} that cannot be taken back now: {reason}."
        )
    backoff = facts.get("backoff")
    if isinstance(backoff, dict):
        who = "Its tenant" if backoff.get("caused_by") == "tenant" else "It"
        out += (
            f" {who} caused "
            f"{counted(number(backoff.get('preemptions')), 'preemption', 'preemptions')} "
            "in the last "
            f"{duration(backoff.get('window_s'))}: it competes one priority step lower until "
            f"{when(backoff.get('until'))}."
        )
    return out


def explanation(
    workload: str, verdict: Verdict, position: int, units: Mapping[str, str] = NO_UNITS
) -> PendingExplanation:
    """The pending entry of the plan for a workload; ``units``: ``flavor_units`` of the
    snapshot (a reader saying a recorded verdict again passes the same, for the flavors
    ``flavors_named`` lists)."""
    facts = verdict.facts
    then = facts.get("then_facts") if verdict.reason == "budget" else None
    extra = hidden_state(then if isinstance(then, Mapping) else facts, units)
    return PendingExplanation(
        workload=workload,
        reason=verdict.reason,
        detail=sentence(verdict, position, units) + extra,
        position=position,
        facts=dict(facts),
    )
