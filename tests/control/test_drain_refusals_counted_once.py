"""A drain's eviction a disruption budget refuses, retried: ``/metrics`` counts preemptions
recorded (one per workload preempted), and the refusals in the evict errors only; the pod
gets a Warning Event naming the refusal once, not at each retry."""

from __future__ import annotations

import pytest
from django.test import Client
from loop_builders import World, build_world

from gpupool.accounting.models import PreemptionEvent
from gpupool.inventory.actions import do_drain_node
from gpupool.inventory.models import Node
from gpupool.quotas.models import PriorityClass

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """Two teams, one 8-GPU node, a loop."""
    return build_world(nodes=1)


def metric(name: str) -> float:
    """One sample of ``/metrics`` by its name and labels (0 when absent)."""
    for line in Client().get("/metrics").content.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def test_a_refused_drain_eviction_retried_counts_no_preemption_until_one_is_recorded(
    world: World,
) -> None:
    world.submit("filler", gpus=8, priority_class=PriorityClass.objects.get(name="low"))
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    world.cluster.refuse.update(p.key for p in world.cluster.pods_of("filler"))
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="maintenance")
    for _ in range(4):
        world.cluster.tick(120)  # past the refusal's back-off: tried again
        world.cycle()
    assert world.workload("filler").state == "running"
    assert not PreemptionEvent.objects.exists()
    assert metric('gpupool_preemptions_total{reason="admin"}') == 0
    errors = metric("gpupool_evict_errors_total")
    assert errors >= 2  # each refusal counts there
    world.cluster.refuse.clear()
    world.cluster.tick(120)
    for _ in range(3):
        world.cycle()
    assert PreemptionEvent.objects.filter(reason="admin").count() == 1
    assert metric('gpupool_preemptions_total{reason="admin"}') == 1
    world.cycle()
    assert metric('gpupool_preemptions_total{reason="admin"}') == 1  # counted once


def test_the_refused_pod_is_told_once_not_at_each_retry(world: World) -> None:
    world.submit("filler", gpus=8, priority_class=PriorityClass.objects.get(name="low"))
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    (pod,) = world.cluster.pods_of("filler")
    world.cluster.refuse.add(pod.key)
    do_drain_node(Node.objects.get(name="n1"), acting_user=None, reason="maintenance")
    for _ in range(4):
        world.cluster.tick(120)
        world.cycle()
    told = [e for e in world.cluster.events_on(pod.key) if e[0] == "EvictionRefused"]
    assert len(told) == 1
    _, message, kind = told[0]
    assert kind == "Warning"
    assert message.startswith("Eviction (a drain) refused by a disruption budget; retried")


def test_the_event_names_the_budget_the_api_gives() -> None:
    from gpupool.control.loop import refusal_words

    why = (
        "eviction refused by a disruption budget: Cannot evict pod as it would violate the "
        "pod's disruption budget.; The disruption budget guard needs 1 healthy pods and has "
        "1 currently"
    )
    assert refusal_words(why, "speech", "admin") == (
        "Eviction (a drain) refused by PodDisruptionBudget speech/guard, which needs 1 healthy "
        "pod and has 1 currently; retried while gpupool still wants the pod evicted."
    )
