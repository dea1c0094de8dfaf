"""A protected runtime capped to the queue's free maximum is said, not reported as a failure
(the tester's issue 4): the pods are scheduled with the shorter window, so the Event is a
Normal one of its own reason (``ProtectedRuntimeCapped``), not a ``FailedScheduling`` Warning."""

from __future__ import annotations

import pytest
from loop_builders import build_world

from gpupool.quotas.actions import do_save_queue

pytestmark = pytest.mark.django_db


def test_a_capped_protected_runtime_is_a_normal_event_and_the_pod_runs(db: None) -> None:
    world = build_world(nodes=1)
    queue = world.queues["team-a"]
    queue.max_protected_runtime_s = 7200
    do_save_queue(queue, acting_user=None)
    pod = world.cluster.add_pod("long", annotations={"gpupool.io/protected-runtime": "5h"})
    world.cycle()
    world.cycle()
    long = world.workload("long")
    assert (long.state, long.protected_runtime_s) == ("admitted", 7200)
    assert world.cluster.pods[pod].node_name == "n1"
    assert world.cluster.events_on(pod) == [
        (
            "ProtectedRuntimeCapped",
            "gpupool.io/protected-runtime: 18000s is capped to queue team-a's free maximum of "
            "7200s (longer protection needs a budgeted priority class)",
            "Normal",
        )
    ]
