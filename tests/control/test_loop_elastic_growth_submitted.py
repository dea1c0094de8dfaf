"""An elastic gang submitted through gpupool grows back (``Plan.grow``) with the pods gpupool
made for it, bound by the loop's apply -- in the cycle, or handed on to the next one (the
pipeline) -- each pod once; a binding that fails takes down none of the pods it ran.

The pool (``loop_builders``): one 8-GPU node; team-a deserves 8 GPUs (up to 16); team-b's
filler of 4 GPUs; ``elastic`` of team-a, 8 pods of 1 GPU, minimum 4.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from loop_builders import World, build_world

from gpupool.accounting.models import UsageInterval
from gpupool.audit.models import AuditEvent
from gpupool.workloads.models import Placement

pytestmark = pytest.mark.django_db


@pytest.fixture(params=[False, True], ids=["in-the-cycle", "pipeline"])
def world(request: pytest.FixtureRequest, db: None) -> Iterator[World]:
    built = build_world(nodes=1)
    built.cluster.concurrent_apply = request.param
    built.pipeline = request.param  # type: ignore[attr-defined]
    yield built
    built.loop.finish_apply()


def cycle(world: World) -> None:
    result = world.loop.run_cycle(pipeline=world.pipeline)  # type: ignore[attr-defined]
    assert result.status == "succeeded", result.error


def run_four(world: World) -> None:
    """The filler runs on 4 GPUs; elastic is admitted with its first 4 pods and runs."""
    world.submit("filler", queue="team-b", gpus=4)
    for _ in range(3):
        cycle(world)
    world.cluster.run()
    world.submit("elastic", gpus=1, count=8, min_member=4)
    for _ in range(4):
        cycle(world)
        world.cluster.run()
    cycle(world)
    world.loop.finish_apply()
    elastic = world.workload("elastic")
    assert elastic.state == "running"
    assert Placement.objects.filter(workload=elastic).count() == 4
    assert len(world.cluster.pods_of("elastic")) == 8  # gpupool made them all: 4 wait
    assert sum(1 for p in world.cluster.pods_of("elastic") if p.node_name) == 4


def end_filler(world: World) -> None:
    for pod in world.cluster.pods_of("filler"):
        world.cluster.finish(pod.key)


def test_a_submitted_elastic_gang_grows_with_the_pods_gpupool_made(world: World) -> None:
    run_four(world)
    end_filler(world)
    cycle(world)  # the filler's end synced; elastic grows by its next 4 pods
    cycle(world)
    world.loop.finish_apply()
    elastic = world.workload("elastic")
    assert elastic.state == "running"
    assert Placement.objects.filter(workload=elastic).count() == 8
    pods = world.cluster.pods_of("elastic")
    assert all(p.node_name == "n1" for p in pods)
    assert all(world.cluster.bound[p.key] == 1 for p in pods)  # each bound once
    assert UsageInterval.objects.get(workload=elastic, ended_at__isnull=True).gpus == 8
    cycle(world)
    world.loop.finish_apply()
    assert all(world.cluster.bound[p.key] == 1 for p in pods)  # and never again


def test_a_failed_growth_binding_keeps_the_pods_it_ran_bound(world: World) -> None:
    run_four(world)
    ran = {p.key for p in world.cluster.pods_of("elastic") if p.node_name}
    waiting = sorted(p.key for p in world.cluster.pods_of("elastic") if not p.node_name)
    world.cluster.fail_binding.add(waiting[-1])  # the last added pod's binding is refused
    end_filler(world)
    cycle(world)
    cycle(world)
    world.loop.finish_apply()
    elastic = world.workload("elastic")
    assert elastic.state == "running"
    assert {p.key for p in world.cluster.pods_of("elastic") if p.node_name} >= ran
    assert all(world.cluster.bound[key] == 1 for key in ran)  # never unbound, never again
    assert not elastic.transitions.filter(from_state="running").exists()
    told = [m for reason, m, _ in world.cluster.events_on(waiting[0]) if reason == "Waiting"]
    assert told and "could not bind it to grow team-a/elastic" in told[0]
    placed = Placement.objects.filter(workload=elastic).count()
    assert placed == sum(1 for p in world.cluster.pods_of("elastic") if p.node_name) == 4
    grown = AuditEvent.objects.filter(action="control.grow_workload", object_id=str(elastic.pk))
    assert grown.count() == 1  # not grown again at once: the same refusal would come back
