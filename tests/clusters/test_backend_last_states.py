"""The backends' contract on removed pods: a removal's ``before`` is the pod's last state,
which says whether it was evicted (the ``DisruptionTarget`` condition the API server adds,
``api_objects.DISRUPTED_BY``) or merely deleted (``kubectl delete``). The control loop tells
a preemption from a user's delete by it (DESIGN §4). Simulated and, marked ``k8s``, the local
plane, through the same ``World`` (``cluster_worlds.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cluster_worlds import EVERY_BACKEND, World, open_world

from gpupool.clusters.api_objects import DISRUPTED_BY, pod_facts
from gpupool.clusters.base import ClusterView, PodFacts, PodKey


@pytest.fixture(params=EVERY_BACKEND)
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    """The contract's backends (``cluster_worlds.EVERY_BACKEND``)."""
    yield from open_world(request)


def test_a_removed_pods_last_state_tells_an_eviction_from_a_delete(world: World) -> None:
    node = world.node(gpus=8)
    evicted = world.pod("evicted", node=node)
    deleted = world.pod("deleted", node=node)
    world.eventually("both pods bound", lambda: world.node_of(evicted) and world.node_of(deleted))
    world.until("both pods", lambda v: evicted.key in v.pods and deleted.key in v.pods)

    outcome = world.backend.evict([evicted], reason="drain")
    assert [r.status for r in outcome.results] == ["evicted"]
    world.delete_behind(deleted)

    last: dict[PodKey, PodFacts] = {}

    def both_gone(view: ClusterView) -> bool:
        for key, change in view.delta.pods.items():
            if change.after is None and change.before is not None:
                last[key] = change.before
        return evicted.key not in view.pods and deleted.key not in view.pods

    world.until("both pods gone", both_gone)
    assert last[evicted.key].annotations.get(DISRUPTED_BY) == "EvictionByEvictionAPI"
    assert DISRUPTED_BY not in last[deleted.key].annotations
    assert last[evicted.key].deleting and last[deleted.key].deleting
    assert last[evicted.key].node_name == last[deleted.key].node_name == node


def test_the_disruption_fact_comes_from_the_condition_never_from_an_annotation() -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "n", "uid": "u",
                     "annotations": {DISRUPTED_BY: "EvictionByEvictionAPI"}},
        "spec": {"schedulerName": "gpupool"},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "DisruptionTarget", "status": "False", "reason": "PreemptionByScheduler"},
        ]},
    }  # fmt: skip
    assert DISRUPTED_BY not in pod_facts(pod).annotations  # set by hand: not an eviction
    pod["status"]["conditions"][1]["status"] = "True"  # type: ignore[index]
    assert pod_facts(pod).annotations[DISRUPTED_BY] == "PreemptionByScheduler"
