"""A pool with nodes but no queue yet -- a fresh install, before an admin has made the tree --
is planned like any other: nothing to admit, evict or explain. The control loop builds such
snapshots from the database; the core once stopped on them (``QuotaTree`` looked for a root
that was not there), which halts every cycle of a running loop."""

from __future__ import annotations

from gpupool.scheduler import next_change_at, plan
from gpupool.scheduler.cycle_state import Cycle
from gpupool.scheduler.shares import queue_shares
from gpupool.scheduler.types import (
    FlavorInfo,
    NodeInfo,
    Plan,
    PolicyInfo,
    PriorityClassInfo,
    Snapshot,
)

NOW = 1_800_000_000.0


def nodes_without_queues() -> Snapshot:
    """Two 8-GPU nodes, a default priority class, and no queue (so no workload either)."""
    return Snapshot(
        flavors=(FlavorInfo("h100"),),
        nodes=tuple(NodeInfo(f"n{i}", "h100", 8, 192_000, 2_048 * 1_024, f"d{i}") for i in (1, 2)),
        queues=(),
        priority_classes=(PriorityClassInfo("normal", 0, default=True),),
        workloads=(),
    )


def test_a_pool_with_nodes_but_no_queue_gives_an_empty_plan() -> None:
    """plan() returns the empty plan instead of failing to find the tree's root."""
    assert plan(nodes_without_queues(), PolicyInfo(), NOW) == Plan(admit=(), evict=(), pending=())


def test_the_loop_reads_a_pool_with_no_queue_like_any_other() -> None:
    """The cycle the pages read (fragmentation figures), the queue shares /metrics reads and
    the next change the loop waits for all work on a pool with no queue."""
    snapshot = nodes_without_queues()
    cycle = Cycle(snapshot, PolicyInfo(), NOW)
    assert cycle.quota.root is None
    assert queue_shares(cycle.quota) == {}
    assert next_change_at(snapshot, PolicyInfo(), NOW) is None
