"""A drain's eviction a disruption budget refuses is no eviction in the cycle's counts (the
tester's issue 3): each retry logged ``'evicted': 1`` beside ``evict_errors: 1`` (the cycle
row's ``evicted``, its recorded counts), though nothing was evicted. Only evictions that
happened count; and the budget's words say "1 healthy pod", not "1 healthy pods"."""

from __future__ import annotations

import pytest
from loop_builders import World, build_world

from gpupool.control.loop import refusal_words, refused_budget
from gpupool.control.models import SchedulingCycle
from gpupool.inventory.actions import do_drain_node
from gpupool.inventory.models import Node
from gpupool.quotas.models import PriorityClass

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    return build_world(nodes=1)


def test_a_refused_drain_eviction_retried_counts_no_eviction_until_one_happens(
    world: World,
) -> None:
    world.submit("filler", gpus=8, priority_class=PriorityClass.objects.get(name="low"))
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    world.cluster.refuse.update(p.key for p in world.cluster.pods_of("filler"))
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="maintenance")
    first = SchedulingCycle.objects.order_by("-id").first()
    assert first is not None
    tried = []
    for _ in range(3):
        world.cluster.tick(120)  # past the refusal's back-off: tried again
        tried.append(world.cycle())
    assert world.workload("filler").state == "running"
    refusals = [r for r in tried if r.counts.get("evict_errors")]
    assert len(refusals) >= 2  # each retry was refused ...
    for result in refusals:  # ... and none counts as an eviction
        assert result.counts["evicted"] == 0 and result.evicted == []
    rows = SchedulingCycle.objects.filter(pk__gt=first.pk)
    assert [row.evicted for row in rows] == [0] * len(rows)
    assert all(row.outcome["counts"]["evicted"] == 0 for row in rows)

    world.cluster.refuse.clear()
    world.cluster.tick(120)
    done = world.cycle()
    assert (done.counts["evicted"], done.counts.get("pods_evicted")) == (1, 1)
    assert SchedulingCycle.objects.order_by("-id").first().evicted == 1  # type: ignore[union-attr]


def test_a_budget_needing_one_healthy_pod_is_said_in_the_singular() -> None:
    why = (
        "eviction refused by a disruption budget: Cannot evict pod as it would violate the "
        "pod's disruption budget.; The disruption budget guard needs 1 healthy pods and has "
        "1 currently"
    )
    assert refused_budget(why, "nlp") == ("nlp/guard", "1 healthy pod and has 1 currently")
    assert "which needs 1 healthy pod and has 1 currently;" in refusal_words(why, "nlp", "admin")
    more = why.replace("needs 1 healthy pods", "needs 2 healthy pods")
    assert refused_budget(more, "nlp")[1] == "2 healthy pods and has 1 currently"
