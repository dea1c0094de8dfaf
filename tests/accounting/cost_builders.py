"""Builders of the cost tests: a small pool: two 8-GPU h100 nodes, three teams, usage by the hour.

``pool`` builds, the day before ``T0``: flavor h100 at 2.00 per GPU-hour, nodes n1 and n2,
the queue tree root -> team-a (tenant a, guarantee 6), team-b (tenant b, guarantee 4) and
team-c (tenant c, no guarantee), each deserving 8 and capped at 16, and the default class
``normal``. ``use(pool, team, gpus, start, end)`` submits a workload in the team's queue and
opens (and, given ``end``, closes) its usage interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from domain_builders import node, priority_class, queue, tenant

from gpupool.accounting.actions import do_close_usage, do_open_usage, do_roll_up_usage
from gpupool.inventory.actions import do_save_flavor, do_set_gpu_health
from gpupool.inventory.models import Flavor, Gpu
from gpupool.quotas.actions import do_set_queue_quota
from gpupool.quotas.models import Queue
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

T0 = datetime.fromisoformat("2026-03-10T10:00:00+00:00")
H = timedelta(hours=1)


@dataclass
class Pool:
    """The cost tests' pool: its flavor and queues by team name."""

    h100: Flavor
    queues: dict[str, Queue]
    made: int = 0


def build_pool() -> Pool:
    """Two 8-GPU h100 nodes and teams a (guarantee 6), b (guarantee 4) and c (none)."""
    before = T0 - timedelta(days=1)
    h100 = do_save_flavor(
        Flavor(name="h100", sharing="exclusive", gpu_memory_gb=80, hourly_price=Decimal("2")),
        acting_user=None,
        at=before,
    )
    node("n1", h100, gpus=8)
    node("n2", h100, gpus=8)
    priority_class("normal", default=True)
    root = queue("root")
    queues = {}
    for name, guarantee in (("a", 6), ("b", 4), ("c", 0)):
        team = queue(f"team-{name}", parent=root, tenant=tenant(name, namespaces=(name,)))
        do_set_queue_quota(
            team,
            h100,
            guarantee=guarantee,
            deserved=8,
            capability=16,
            acting_user=None,
            at=before,
        )
        queues[name] = team
    return Pool(h100=h100, queues=queues)


def use(pool: Pool, team: str, gpus: int, start: datetime, end: datetime | None = None) -> Workload:
    """A workload of ``team`` holding ``gpus`` h100 GPUs from ``start`` (to ``end``)."""
    pool.made += 1
    workload = do_submit_workload(
        f"job-{pool.made}",
        queue=pool.queues[team],
        pod_sets=[PodSetSpec(1, gpus=gpus, flavor=pool.h100)],
        at=start,
    )
    do_open_usage(workload, flavor=pool.h100, gpus=gpus, at=start)
    if end is not None:
        do_close_usage(workload, at=end)
    return workload


def build_period(pool: Pool) -> Pool:
    """The four hours of test_cost_lines' table, rolled up as the beat would: at T0, at the
    half-way changes, and at the end."""
    do_roll_up_usage(until=T0)
    use(pool, "a", 4, T0)
    use(pool, "b", 2, T0, T0 + H)
    use(pool, "c", 4, T0, T0 + 2 * H)
    half_way = T0 + 2 * H
    do_set_queue_quota(
        pool.queues["b"],
        pool.h100,
        guarantee=10,
        deserved=10,
        capability=16,
        acting_user=None,
        at=half_way,
    )
    pool.h100.hourly_price = Decimal("3")
    do_save_flavor(pool.h100, acting_user=None, at=half_way)
    for gpu in Gpu.objects.filter(node__name="n2", index__lt=4):
        do_set_gpu_health(gpu, healthy=False, reason="XID 79: fell off the bus", acting_user=None)
    do_roll_up_usage(until=half_way)
    use(pool, "b", 5, half_way)
    do_roll_up_usage(until=T0 + 4 * H)
    return pool
