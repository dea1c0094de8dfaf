"""The unit a flavor's capacity, quotas and use count in: the rule the pages
(``dashboard.facts``) and the API (``control.api``'s fragmentation) share, so the API need
not import the dashboard; and the unit of what a preemption freed, which the Preemptions page
and the preemptions API (its ``unit``, and so its CSVs) share."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

from gpupool.inventory.choices import Sharing
from gpupool.inventory.models import Flavor, Node

# Singular (the plural adds an "s"), as ``gpupool nodes`` and the nodes API
# (``mig_instances``) say it: a MIG flavor's are the MIG instances of its profile, cut from
# its cards, never added to another flavor's GPUs.
GPU_UNIT = "GPU"
MIG_UNIT = "MIG instance"


def flavor_unit(sharing: str) -> str:
    """The unit of a flavor of ``sharing``: MIG instances for a MIG flavor, else GPUs."""
    return MIG_UNIT if sharing == Sharing.MIG else GPU_UNIT


def flavor_units(names: Iterable[str]) -> dict[str, str]:
    """The unit of each of the flavors ``names``, by name (``flavor_unit``), in one query
    for them all (none when no name); a name of no flavor is left out (its figures: GPUs)."""
    named = sorted(set(names))
    if not named:
        return {}
    sharing = Flavor.objects.filter(name__in=named).values_list("name", "sharing")
    return {name: flavor_unit(of) for name, of in sharing}


class FlavorUnits(Mapping[str, str]):
    """The unit of every flavor, by name (``flavor_unit``): the mapping the core's sentences
    take (``scheduler.explain.flavor_units``), for a reader that says a recorded verdict
    again (``workloads.queries.sentence``) so that a MIG flavor's quantities read in MIG
    instances. The flavor table is small: it is read whole, in one query, the first time a
    unit is asked, none before -- make one a request and pass it down, so that a list of 100
    workloads costs the same one query as a list of one (and none where no sentence is said
    again)."""

    def __init__(self) -> None:
        self._units: dict[str, str] | None = None

    def _read(self) -> dict[str, str]:
        if self._units is None:
            rows = Flavor.objects.order_by().values_list("name", "sharing")
            self._units = {name: flavor_unit(sharing) for name, sharing in rows}
        return self._units

    def __getitem__(self, name: str) -> str:
        return self._read()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


def flavor_units_by_id(ids: Iterable[int]) -> dict[int, str]:
    """``flavor_units`` by the flavors' ids (an audited quota keeps its ``flavor_id``)."""
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    sharing = Flavor.objects.filter(pk__in=wanted).values_list("pk", "sharing")
    return {pk: flavor_unit(of) for pk, of in sharing}


def mig_node_names(names: Iterable[str]) -> set[str]:
    """Which of the nodes ``names`` are of a MIG flavor (one query; none when no name)."""
    named = sorted(set(names))
    if not named:
        return set()
    on_mig = Node.objects.filter(name__in=named, flavor__sharing=Sharing.MIG)
    return set(on_mig.values_list("name", flat=True))


def freed_unit(nodes: Sequence[str], mig_nodes: Collection[str]) -> str:
    """The unit of what a victim stopped on ``nodes`` freed: MIG instances where every one
    of its nodes is of a MIG flavor (``mig_nodes``: ``mig_node_names`` of the events' nodes),
    else GPUs -- an event without its nodes (recorded before they were kept) is in GPUs."""
    return MIG_UNIT if nodes and all(node in mig_nodes for node in nodes) else GPU_UNIT
