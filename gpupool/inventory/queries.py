"""The pool's fragmentation per flavor, read off the decision core's own view of the nodes.

From the cluster state a cycle starts with (healthy GPUs of nodes that take pods -- not
cordoned, not excluded by the cluster, as ``models.takes_pods`` -- less what runs there) and
the pod shapes it places against (``Placer.distributions``, FGD's "target workload"), per
flavor:

- **free GPUs**: healthy and free (shared flavors count their free fractions);
- **fragmented GPUs**: FGD's measure, the free GPUs the usual work could not use where they
  are (Weng et al., ATC'23), each node weighed over the GPU shapes it could ever hold
  (``fragmentation.fitting_node_fragmentation``: an 8-GPU pod that may also use a flavor of
  4-GPU nodes does not make its idle nodes fragmented);
- **stranded GPUs**: free GPUs on nodes without the CPU the usual work brings along with them
  (``fragmentation.cpu_stranded_milli``), the usual work of each node being, as above, the
  GPU shapes it could ever hold (``fragmentation.gpu_shapes_that_fit``);
- **the largest gang** placeable now inside one NVLink domain, in whole GPUs, and for each
  gang size of ``GANG_SIZES`` GPUs that the flavor's largest domain could ever hold
  (``gang_sizes``) how many such gangs fit now at once, each inside one domain.
  A gang of ``S`` GPUs is ``S // p`` pods of ``p = min(S, GPUs of the flavor's largest node)``
  GPUs and, when ``p`` does not divide ``S``, one pod of the rest (an 8-GPU node takes a
  16-GPU gang as two pods of 8; an NVL72 domain of 4-GPU nodes a 72-GPU one as 18 pods of 4;
  16-GPU nodes a 72-GPU one as 4 pods of 16 and 1 of 8 -- not 5 of 16, which is 80). The
  placer places a gang pod by pod, and a pod takes only its GPUs: the node of the pod of 8
  keeps its other GPUs for other pods (another gang's pod of 8 among them), so no gang is
  counted as holding whole nodes. A domain holds as many gangs as the pods that fit on its
  nodes (``fragmentation.fits`` / ``pick_gpus`` / ``take``, counted once per node state)
  allow: the pods of ``p`` where they leave the most room for the pods of the rest
  (``_gangs_with_a_rest``).

Plain functions over the core's objects: no Django here.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from gpupool.scheduler.fragmentation import (
    MILLI_PER_GPU,
    NodeState,
    PodShape,
    ShapeDistribution,
    cpu_stranded_milli,
    empty_node,
    fits,
    fitting_node_fragmentation,
    gpu_shapes_that_fit,
    pick_gpus,
    take,
)
from gpupool.scheduler.statement import ClusterState
from gpupool.scheduler.types import NodeInfo

GANG_SIZES = (1, 2, 4, 8, 16, 72)
NO_SHAPES = ShapeDistribution(())


def gang_sizes(largest_domain_gpus: int) -> tuple[int, ...]:
    """The gang sizes of ``GANG_SIZES`` a domain of ``largest_domain_gpus`` GPUs could hold:
    a larger gang never fits inside one domain of the flavor (the core's "never fits" for a
    gang bound to one domain, ``CycleState.larger_than_any_domain``), so it is not counted as
    one that fits none now (72 MIG instances in a pool of 32)."""
    return tuple(size for size in GANG_SIZES if size <= largest_domain_gpus)


@dataclass(frozen=True, slots=True)
class GangFit:
    """How many gangs of ``gpus`` GPUs, each inside one NVLink domain, fit now: gangs of
    ``pods`` pods of ``gpus_per_pod`` GPUs, the last one of the rest where they do not divide
    (72 on 16-GPU nodes: 4 x 16 + 1 x 8)."""

    gpus: int
    pods: int  # pods of the gang
    gpus_per_pod: int
    gangs: int


@dataclass(frozen=True, slots=True)
class FlavorFragmentation:
    """One flavor's free, fragmented and stranded GPUs, and the gangs that fit now."""

    flavor: str
    nodes: int
    domains: int
    healthy_gpus: int
    free_gpus: float
    fragmented_gpus: float
    stranded_gpus: float
    largest_gang_gpus: int  # whole GPUs one gang could take inside one domain now
    gangs: tuple[GangFit, ...]  # the sizes the largest domain could hold (``gang_sizes``)
    # The most free on any one GPU (a shared GPU's rest): what a pod asking a share needs.
    most_free_on_one_gpu: float = 0.0
    # The healthy GPUs of the largest domain, its cordons ended and others' pods gone: the
    # largest gang that could ever fit inside one domain.
    largest_domain_gpus: int = 0


def _pods_that_fit(state: NodeState, shape: PodShape, known: dict[NodeState, int]) -> int:
    """How many pods of ``shape`` the node takes, one after another as the placer would."""
    found = known.get(state)
    if found is None:
        found, current = 0, state
        while fits(current, shape):
            gpus = pick_gpus(current, shape)
            if gpus is None:
                break
            current = take(current, shape, gpus)
            found += 1
        known[state] = found
    return found


def _rooms(
    state: NodeState, big: PodShape, small: PodShape, known: dict[NodeState, tuple[int, ...]]
) -> tuple[int, ...]:
    """For ``k`` = 0, 1, ... up to the pods of ``big`` the node takes, one after another as the
    placer would: how many pods of ``small`` it still takes after ``k`` pods of ``big``."""
    found = known.get(state)
    if found is None:
        rooms: list[int] = []
        smalls: dict[NodeState, int] = {}
        current = state
        while True:
            rooms.append(_pods_that_fit(current, small, smalls))
            gpus = pick_gpus(current, big) if fits(current, big) else None
            if gpus is None:
                break
            current = take(current, big, gpus)
        found = known[state] = tuple(rooms)
    return found


def _gangs_with_a_rest(rooms: list[tuple[int, ...]], pods_of_p: int) -> int:
    """How many gangs of ``pods_of_p`` big pods and one small pod (the rest) the nodes hold
    at once, given each node's ``_rooms``: each big pod goes where it takes the fewest small
    pods' room, and a gang more fits while the small pods' room left is at least the gangs."""
    losses = [(room[0] - room[1], node, 1) for node, room in enumerate(rooms) if len(room) > 1]
    heapq.heapify(losses)
    small = sum(room[0] for room in rooms)
    gangs = 0
    while True:
        for _ in range(pods_of_p):
            if not losses:
                return gangs
            loss, node, taken = heapq.heappop(losses)
            small -= loss
            room = rooms[node]
            if taken + 1 < len(room):
                heapq.heappush(losses, (room[taken] - room[taken + 1], node, taken + 1))
        if small < gangs + 1:
            return gangs
        gangs += 1


def _empty(node: NodeInfo) -> NodeState:
    """The node with nothing on it: its sound GPUs (healthy, others' pods gone), CPU and
    memory; what the shapes it could ever hold are judged against."""
    return empty_node(node.sound_gpus, node.cpu_milli, node.memory_mib)


def flavor_fragmentation(
    cluster: ClusterState, distributions: dict[str, ShapeDistribution]
) -> tuple[FlavorFragmentation, ...]:
    """The fragmentation of every flavor that has nodes, by flavor name."""
    report: list[FlavorFragmentation] = []
    flavors = sorted({node.flavor for node in cluster.nodes.values()})
    for flavor in flavors:
        domains: dict[str, list[str]] = {
            domain: names for (of, domain), names in cluster.domain_nodes.items() if of == flavor
        }
        names = [name for members in domains.values() for name in members]
        states = [cluster.state[name] for name in names]
        dist = distributions.get(flavor, NO_SHAPES)
        largest_node = max(cluster.nodes[name].gpus for name in names)
        whole = {
            name: sum(1 for free in cluster.state[name].gpu_free_milli if free >= MILLI_PER_GPU)
            for name in names
        }
        largest_domain = cluster.largest_domain_gpus().get(flavor, 0)
        gangs: list[GangFit] = []
        for size in gang_sizes(largest_domain):
            per_pod = max(1, min(size, largest_node))
            pods_of_p, rest = divmod(size, per_pod)
            shape = PodShape(per_pod)
            known: dict[NodeState, int] = {}
            rooms: dict[NodeState, tuple[int, ...]] = {}
            last = PodShape(rest) if rest else None
            count = 0
            for members in domains.values():
                if last is not None:  # pods of ``per_pod`` and one of the rest, side by side
                    each = [_rooms(cluster.state[name], shape, last, rooms) for name in members]
                    count += _gangs_with_a_rest(each, pods_of_p)
                    continue
                pods = sum(_pods_that_fit(cluster.state[name], shape, known) for name in members)
                count += pods // pods_of_p
            gangs.append(GangFit(size, pods_of_p + (1 if rest else 0), per_pod, count))
        report.append(
            FlavorFragmentation(
                flavor=flavor,
                nodes=len(names),
                domains=len(domains),
                healthy_gpus=sum(cluster.nodes[name].healthy_gpus for name in names),
                free_gpus=sum(state.free_milli for state in states) / MILLI_PER_GPU,
                fragmented_gpus=sum(
                    fitting_node_fragmentation(
                        cluster.state[name], _empty(cluster.nodes[name]), dist
                    )
                    for name in names
                )
                / MILLI_PER_GPU,
                stranded_gpus=sum(
                    cpu_stranded_milli(
                        cluster.state[name],
                        gpu_shapes_that_fit(dist, _empty(cluster.nodes[name])),
                    )
                    for name in names
                )
                / MILLI_PER_GPU,
                largest_gang_gpus=max(
                    (sum(whole[name] for name in members) for members in domains.values()),
                    default=0,
                ),
                gangs=tuple(gangs),
                most_free_on_one_gpu=max(
                    (max(state.gpu_free_milli, default=0) for state in states), default=0
                )
                / MILLI_PER_GPU,
                largest_domain_gpus=largest_domain,
            )
        )
    return tuple(report)


def fragmentation_sample(
    cluster: ClusterState, distributions: dict[str, ShapeDistribution]
) -> dict[str, dict[str, float]]:
    """Per flavor, the free and fragmented GPUs and the largest gang in one domain: the part
    of ``flavor_fragmentation`` a scheduling cycle records for the trend, cheap enough for
    every cycle (each distinct node state is measured once)."""
    measured: dict[tuple[str, NodeState, int, int, int], float] = {}
    sample: dict[str, dict[str, float]] = {}
    for (flavor, _), names in sorted(cluster.domain_nodes.items()):
        dist = distributions.get(flavor, NO_SHAPES)
        figures = sample.setdefault(flavor, {"free": 0.0, "fragmented": 0.0, "largest_gang": 0.0})
        whole = 0
        for name in names:
            state = cluster.state[name]
            if not state.free_milli:  # a full node fragments nothing
                continue
            node = cluster.nodes[name]
            key = (flavor, state, node.sound_gpus, node.cpu_milli, node.memory_mib)
            if key not in measured:
                measured[key] = fitting_node_fragmentation(state, _empty(node), dist)
            figures["free"] += state.free_milli / MILLI_PER_GPU
            figures["fragmented"] += measured[key] / MILLI_PER_GPU
            whole += sum(1 for free in state.gpu_free_milli if free >= MILLI_PER_GPU)
        figures["largest_gang"] = max(figures["largest_gang"], whole)
    return sample
