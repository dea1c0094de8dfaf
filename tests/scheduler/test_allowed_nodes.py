"""A pod set's allowed nodes: its pods are placed only there (DESIGN section 4).

On Kubernetes a pod's nodeSelector, required node affinity and tolerations decide which nodes
the kubelet accepts it on; the control loop gives each pod set those nodes as
``allowed_nodes``, and placement, preemption and the scenario files honour them.
"""

from __future__ import annotations

from typing import Any

import pytest
from scheduler_builders import Case, pool, queue, run_case, scenario, workload

from gpupool.scheduler import plan
from gpupool.scheduler.scenario import ScenarioError, scenario_from_dict, snapshot_to_dict


def restricted(name: str, nodes: list[str], **fields: Any) -> dict[str, Any]:
    """A pending workload whose pods may only use ``nodes``."""
    out = workload(name, **fields)
    out["pod_sets"][0]["allowed_nodes"] = nodes
    return out


def test_a_pod_set_runs_only_on_its_allowed_nodes() -> None:
    result = run_case(
        Case(
            "a restricted gang lands on its allowed nodes, though others are emptier",
            pool(4),
            [queue("team-a", deserved=32)],
            [
                workload("busy", gpus=4, on=[("n3", [0, 1, 2, 3])]),
                restricted("picky", ["n3", "n4"], gpus=4, count=2),
            ],
            want_admitted={"picky"},
        )
    )
    (admission,) = result.admit
    assert {pod.node for pod in admission.placement} <= {"n3", "n4"}


def test_a_pod_set_whose_allowed_nodes_are_full_waits() -> None:
    result = run_case(
        Case(
            "no room on the allowed node: pending, though the pool has room",
            pool(2),
            [queue("team-a", deserved=16)],
            [
                workload("busy", gpus=8, on=[("n1", list(range(8)))]),
                restricted("picky", ["n1"], gpus=1),
            ],
            want_not_admitted={"picky"},
        )
    )
    assert [p.workload for p in result.pending] == ["picky"]


def test_a_domain_gang_stays_inside_its_allowed_nodes() -> None:
    result = run_case(
        Case(
            "one NVLink domain, and only its allowed nodes in it",
            pool(4, domain_size=2),
            [queue("team-a", deserved=32)],
            [restricted("picky", ["n3", "n4"], gpus=8, count=2, topology="domain")],
            want_admitted={"picky"},
        )
    )
    assert {pod.node for pod in result.admit[0].placement} == {"n3", "n4"}


def test_preemption_frees_room_only_where_the_preemptor_may_run() -> None:
    run_case(
        Case(
            "the only victim that helps is on the allowed node",
            pool(2),
            [queue("team-a", deserved=16)],
            [
                workload("on-n1", gpus=8, priority="low", on=[("n1", list(range(8)))]),
                workload("on-n2", gpus=8, priority="low", on=[("n2", list(range(8)))]),
                restricted("picky", ["n2"], gpus=8, priority="normal"),
            ],
            want_evicted={"on-n2": "preempt"},
        )
    )


def test_allowed_nodes_read_and_write_back_in_scenario_files() -> None:
    raw = scenario(pool(2), [queue("team-a", deserved=16)], [restricted("picky", ["n2"], gpus=1)])
    loaded = scenario_from_dict(raw)
    (picky,) = loaded.snapshot.workloads
    assert picky.pod_sets[0].allowed_nodes == frozenset({"n2"})
    written = snapshot_to_dict(loaded.snapshot, loaded.policy, loaded.now)
    assert written["workloads"][0]["pod_sets"][0]["allowed_nodes"] == ["n2"]
    again = scenario_from_dict(written)
    assert again.snapshot == loaded.snapshot
    assert plan(again.snapshot, again.policy, again.now) == plan(
        loaded.snapshot, loaded.policy, loaded.now
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("n1", "must be a list of node names"),
        (["n9"], "allowed_nodes[0]: unknown node 'n9'"),
        ([3], "allowed_nodes[0]: unknown node 3"),
    ],
)
def test_allowed_nodes_must_name_nodes_of_the_pool(value: object, message: str) -> None:
    bad = restricted("picky", [], gpus=1)
    bad["pod_sets"][0]["allowed_nodes"] = value
    with pytest.raises(ScenarioError, match=message.replace("[", r"\[").replace("]", r"\]")):
        scenario_from_dict(scenario(pool(1), [queue("team-a", deserved=8)], [bad]))
