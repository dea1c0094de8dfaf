"""Who holds each GPU, read off the decision core's snapshot: the rows of the Fragmentation
page's heatmap (NVLink domain, then node, then GPU) and their per-domain sums.

A GPU is *broken* when it is unhealthy, *cordoned* when its node is (whatever runs there
keeps running), else held by the tenants whose running or admitted workloads the snapshot
places on it (a shared GPU may hold several, each with its milli-GPU), else *free*. A
workload's tenant is its queue's (the queue's own name when the queue has no tenant).

A GPU that work holds is its holder's until the work leaves, broken or cordoned too: the
core's quota tree counts it in the holder's usage (what the Queues page reads), so the
cell's colour, the legend and the per-domain table count it to the holder as well. Of such
a GPU nothing is free (``initial_state``); "broken" and "cordoned" count what nobody holds
of a broken GPU or a cordoned node's, and its hover and the table's "Held by" say which held
GPUs are broken or cordoned. So every GPU is counted once: its holders' parts, its free
part, and the rest under its state.

What is free of each GPU is the decision core's own rule (``statement.initial_state``, what
the Fragmentation figures count): the per-domain table and the figures' "free GPUs on N
nodes in M domains" (``free_spread``) count the same GPUs.

Pure: the core's ``Snapshot`` in, plain data out; no Django.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpupool.dashboard.facts import GPU_UNIT, MIG_UNIT, in_unit
from gpupool.number_formats import GPU_PLACES, plain_number
from gpupool.scheduler.statement import initial_state
from gpupool.scheduler.types import MILLI, Snapshot

FREE = "free"
BROKEN = "broken"
CORDONED = "cordoned"
OTHER = "another scheduler"  # held by pods gpupool does not place (``NodeInfo.foreign_gpus``)
STATES = (FREE, BROKEN, CORDONED, OTHER)


@dataclass(frozen=True, slots=True)
class GpuCell:
    """One GPU (a MIG instance on a MIG node): its state and who holds it, in milli-GPU."""

    index: int
    state: str  # FREE, BROKEN, CORDONED, OTHER, or "used"
    holders: tuple[tuple[str, int], ...] = ()  # (tenant, milli-GPU), most first
    free_milli: int = 0  # what the scheduler may still place on it (a shared GPU's rest too)

    @property
    def main_holder(self) -> str | None:
        """The tenant holding most of the GPU (ties by name), if any."""
        return self.holders[0][0] if self.holders else None

    @property
    def category(self) -> str:
        """What colours the cell: its main holder (a broken GPU or a cordoned node's that
        work still holds too), or its state."""
        return self.main_holder or self.state

    @property
    def rest_milli(self) -> int:
        """What neither its holders hold nor the scheduler may place: the broken, cordoned or
        another scheduler's part (a whole such GPU nobody holds; nothing of a used one)."""
        if self.state not in (BROKEN, CORDONED, OTHER):
            return 0
        return max(0, MILLI - sum(milli for _, milli in self.holders) - self.free_milli)


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One node of the heatmap, with its GPUs in index order."""

    node: str
    domain: str
    flavor: str
    cells: tuple[GpuCell, ...]
    physical_gpus: int | None = None  # MIG nodes: the cards the cells (instances) are cut from

    @property
    def cells_per_gpu(self) -> int:
        """Cells one physical GPU gives: its MIG instances, else 1."""
        if not self.physical_gpus:
            return 1
        return max(1, len(self.cells) // self.physical_gpus)

    @property
    def cards(self) -> int:
        """Its physical GPUs (a MIG node's cards, not the instances cut from them)."""
        return self.physical_gpus or len(self.cells)

    @property
    def unit(self) -> str:
        """What a cell is: a MIG instance on a MIG node, else a GPU (as
        ``inventory.units.flavor_unit`` says a flavor's)."""
        return MIG_UNIT if self.physical_gpus else GPU_UNIT


@dataclass
class DomainSummary:
    """One NVLink domain's GPUs: how many, free, broken, on cordoned nodes, and per tenant
    (in GPUs; a shared GPU counts each holder's fraction)."""

    domain: str
    flavor: str
    nodes: int = 0
    gpus: int = 0
    free: int = 0  # GPUs wholly free (the heatmap's free cells)
    broken: float = 0.0  # broken GPUs nobody holds (a held one is its holder's)
    cordoned: float = 0.0  # GPUs of cordoned nodes nobody holds
    by_tenant: dict[str, float] = field(default_factory=dict)
    impaired_by_tenant: dict[str, dict[str, float]] = field(default_factory=dict)
    # of ``by_tenant``, per tenant, what it holds of broken GPUs and cordoned nodes
    free_gpus: float = 0.0  # free GPUs as the scheduler counts them: shared GPUs' rests too
    free_nodes: int = 0  # its nodes with any GPU free
    first_node: str = ""  # its first node by name (the rows' order): what names a clique
    unit: str = GPU_UNIT  # what it counts: a MIG flavor's MIG instances, else GPUs

    @property
    def own_node(self) -> bool:
        """Whether the domain is one node outside any clique (no ``nvidia.com/gpu.clique``:
        the node is its own domain, named after it; a PCIe flavor's every node)."""
        return self.nodes == 1 and self.domain == self.first_node

    @property
    def label(self) -> str:
        """The domain as the page names it (``domain_label``)."""
        return domain_label(self.domain, self.first_node, self.nodes)

    def held_by(self) -> str:
        """Who holds the domain's GPUs, in words (``nlp 4 GPUs (1 broken), cv 0.5 GPUs``; a
        MIG flavor's in MIG instances; empty: nobody): one string, not a template loop per
        domain (B5's h100 has 227 domains)."""
        words = []
        for tenant, held in self.by_tenant.items():
            impaired = self.impaired_by_tenant.get(tenant, {})
            notes = ", ".join(
                f"{plain_number(amount, GPU_PLACES)} {state}"
                for state, amount in impaired.items()
                if amount
            )
            words.append(f"{tenant} {in_unit(held, self.unit)}" + (f" ({notes})" if notes else ""))
        return ", ".join(words)


# A domain name at most this long reads as it is (``nvl72-rack3``, a node's own name); a
# longer one is a clique id (``<cluster UUID>.<clique>``, 38 characters and more).
READABLE_DOMAIN = 24


def domain_label(domain: str, first_node: str, nodes: int) -> str:
    """An NVLink domain's name for people, stable while its nodes are: the name itself when
    short, else (a clique id such as ``24758309-…-….1``) its first node by name and how many
    more it holds (``gb200-001 and 17 more nodes``). The full id goes in a title beside it."""
    if len(domain) <= READABLE_DOMAIN or not first_node:
        return domain
    more = nodes - 1
    if more < 1:
        return f"{first_node}'s clique"
    return f"{first_node} and {more} more node{'s' if more != 1 else ''}"


def gpu_rows(snapshot: Snapshot) -> list[NodeRow]:
    """Every node of the snapshot as a heatmap row, by flavor, NVLink domain and name."""
    tenant_of_queue = {queue.name: queue.tenant or queue.name for queue in snapshot.queues}
    held: dict[tuple[str, int], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for workload in snapshot.workloads:
        if workload.state != "running":
            continue
        tenant = tenant_of_queue.get(workload.queue, workload.queue)
        for pod in workload.placement:
            for index in pod.gpus:
                held[(pod.node, index)][tenant] += pod.milli if pod.milli is not None else MILLI
    rows = []
    for node in sorted(snapshot.nodes, key=lambda n: (n.flavor, n.domain, n.name)):
        used = {
            index: sum(by_tenant.values())
            for index in range(node.gpus)
            if (by_tenant := held.get((node.name, index)))
        }
        free = initial_state(node, (used, 0, 0)).gpu_free_milli
        cells = []
        for index in range(node.gpus):
            holders = tuple(
                sorted(held.get((node.name, index), {}).items(), key=lambda h: (-h[1], h[0]))
            )
            if index in node.unhealthy_gpus:
                state = BROKEN
            elif node.cordoned:
                state = CORDONED
            elif index in node.foreign_gpus:
                state = OTHER
            elif holders:
                state = "used"
            else:
                state = FREE
            cells.append(GpuCell(index, state, holders, free[index]))
        rows.append(NodeRow(node.name, node.domain, node.flavor, tuple(cells), node.physical_gpus))
    return rows


def domain_summaries(rows: Iterable[NodeRow]) -> list[DomainSummary]:
    """Per NVLink domain (in the rows' order), its GPUs by state and by tenant."""
    summaries: dict[tuple[str, str], DomainSummary] = {}
    for row in rows:
        key = (row.flavor, row.domain)
        summary = summaries.get(key)
        if summary is None:
            summary = summaries[key] = DomainSummary(
                row.domain, row.flavor, first_node=row.node, unit=row.unit
            )
        summary.nodes += 1
        free_milli = sum(cell.free_milli for cell in row.cells)
        summary.free_gpus += free_milli / MILLI
        summary.free_nodes += free_milli > 0
        for cell in row.cells:
            summary.gpus += 1
            if cell.state == FREE:
                summary.free += 1
            elif cell.state == BROKEN:
                summary.broken += cell.rest_milli / MILLI
            elif cell.state == CORDONED:
                summary.cordoned += cell.rest_milli / MILLI
            for tenant, milli in cell.holders:
                summary.by_tenant[tenant] = summary.by_tenant.get(tenant, 0.0) + milli / MILLI
                if cell.state in (BROKEN, CORDONED):
                    impaired = summary.impaired_by_tenant.setdefault(tenant, {})
                    impaired[cell.state] = impaired.get(cell.state, 0.0) + milli / MILLI
    return list(summaries.values())


@dataclass(frozen=True, slots=True)
class FreeSpread:
    """Where a flavor's free GPUs are: how many, on how many of its nodes and NVLink domains
    (those with any GPU free), of how many."""

    gpus: float
    nodes: int
    domains: int
    all_nodes: int
    all_domains: int
    nvlink: bool = True  # False: every domain is one node of its own (no NVLink between nodes)


def free_spread(summaries: Iterable[DomainSummary]) -> FreeSpread:
    """The free GPUs of the domains' table, and the nodes and domains they are on: what the
    Fragmentation page's "Free" card says, so that the card and the table count the same."""
    listed = list(summaries)
    return FreeSpread(
        gpus=sum(summary.free_gpus for summary in listed),
        nodes=sum(summary.free_nodes for summary in listed),
        domains=sum(1 for summary in listed if summary.free_nodes),
        all_nodes=sum(summary.nodes for summary in listed),
        all_domains=len(listed),
        nvlink=has_nvlink(listed),
    )


def has_nvlink(summaries: Iterable[DomainSummary]) -> bool:
    """Whether any of the domains is more than one node's own (a clique,
    ``nvidia.com/gpu.clique``): without one the page calls the flavor's domains nodes."""
    return any(not summary.own_node for summary in summaries)


def legend_counts(rows: Iterable[NodeRow]) -> dict[str, float]:
    """GPUs of each colour of the heatmap, counted as the cells and their hovers count them:
    free, what the scheduler may still place (``free_milli``: a shared GPU's unused rest too,
    as the per-domain table and the "Free" card count); each tenant, what it holds of the GPUs
    in use (its fraction of a shared one), a broken GPU or a cordoned node's that its work
    still holds too (as the quota tree and the Queues page count it); broken, cordoned and
    another scheduler's, what nobody holds of their cells (``GpuCell.rest_milli``). A GPU's
    parts add up to it, so the counts add up to the cells."""
    counts: dict[str, float] = defaultdict(float)
    for row in rows:
        for cell in row.cells:
            if cell.free_milli:
                counts[FREE] += cell.free_milli / MILLI
            for tenant, milli in cell.holders:
                counts[tenant] += milli / MILLI
            if rest := cell.rest_milli:
                counts[cell.state] += rest / MILLI
    return dict(counts)


def tenants_in(rows: Iterable[NodeRow]) -> list[str]:
    """The tenants holding GPUs in the rows, by name."""
    return sorted({tenant for row in rows for cell in row.cells for tenant, _ in cell.holders})


def cell_reasons(
    rows: Iterable[NodeRow], broken: Iterable[tuple[str, int, str]]
) -> dict[str, dict[int, str]]:
    """Why each broken cell is broken, from ``(node, physical GPU index, reason)``: a broken
    card takes all its MIG instances with it."""
    per_gpu = {row.node: row.cells_per_gpu for row in rows}
    reasons: dict[str, dict[int, str]] = defaultdict(dict)
    for node, index, why in broken:
        count = per_gpu.get(node, 1)
        for cell in range(index * count, index * count + count):
            reasons[node][cell] = why
    return dict(reasons)


def describe(
    row: NodeRow,
    cell: GpuCell,
    reasons: dict[str, dict[int, str]] | None = None,
    domain_names: dict[str, str] | None = None,
) -> str:
    """One cell in words, for its hover and the details panel: ``h100-07 GPU 3 (domain
    h100-07): nlp 1 GPU``, ``... nlp 0.5 GPUs, 0.5 GPUs free`` (a shared GPU's rest, which
    the legend's "free" counts), ``... broken: XID 79``, ``... free``; on a MIG node the cell
    is a MIG instance, named with its card (``m1 MIG instance 3 of GPU 1 (domain m1): nlp 1
    MIG instance``). ``domain_names``: the domains' labels as the per-domain table names them
    (``DomainSummary.label``)."""
    domain = (domain_names or {}).get(row.domain, row.domain)
    unit = row.unit
    if unit == MIG_UNIT:
        where = f"{row.node} {unit} {cell.index} of GPU {cell.index // row.cells_per_gpu}"
    else:
        where = f"{row.node} {unit} {cell.index}"
    where += f" (domain {domain})"
    held = ", ".join(f"{tenant} {in_unit(milli / MILLI, unit)}" for tenant, milli in cell.holders)
    until = f"; {held} until its work leaves" if held else ""
    if cell.state == BROKEN:
        why = (reasons or {}).get(row.node, {}).get(cell.index, "")
        return f"{where}: broken" + (f": {why}" if why else "") + until
    if cell.state == CORDONED:
        return f"{where}: on a cordoned node{until}"
    if cell.state == OTHER:
        return f"{where}: held by another scheduler's pods"
    if cell.state == FREE:
        return f"{where}: free"
    rest = f", {in_unit(cell.free_milli / MILLI, unit)} free" if cell.free_milli else ""
    return f"{where}: {held}{rest}"
