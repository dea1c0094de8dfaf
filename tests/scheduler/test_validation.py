"""Malformed scenarios are refused with a message that names the field, and no plan."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from scheduler_builders import node, pool, queue, scenario, workload

from gpupool.scheduler.scenario import ScenarioError, policy_from_dict, scenario_from_dict
from gpupool.scheduler.types import PolicyInfo

Mutation = Callable[[dict[str, Any]], None]


def base() -> dict[str, Any]:
    """A valid scenario the cases break one field at a time."""
    return scenario(
        pool(2),
        [queue("team-a", deserved=8, capability=16)],
        [
            workload("w0", gpus=4, on=[("n1", [0, 1, 2, 3])]),
            workload("w1", gpus=8),
        ],
    )


@dataclass
class Bad:
    """A way to break a scenario and the start of the message it must produce."""

    name: str
    mutate: Mutation
    message: str


def _set(path: list[Any], value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return mutate


def _append(key: str, value: Any) -> Mutation:
    return lambda data: data[key].append(value)


CASES = [
    Bad("an unknown top-level key", _set(["colour"], "blue"), "colour: unknown key"),
    Bad(
        "an unknown workload key",
        _set(["workloads", 1, "prio"], 3),
        "workloads[1].prio: unknown key",
    ),
    Bad(
        "an unknown flavor on a pod set",
        _set(["workloads", 1, "pod_sets", 0, "flavor"], "tpu"),
        "workloads[1].pod_sets[0].flavor: unknown flavor",
    ),
    Bad(
        "an unknown flavor on a node",
        _set(["nodes", 0, "flavor"], "tpu"),
        "nodes[0].flavor: unknown flavor",
    ),
    Bad(
        "negative GPUs on a pod set",
        _set(["workloads", 1, "pod_sets", 0, "gpus"], -1),
        "workloads[1].pod_sets[0].gpus: must be >= 0",
    ),
    Bad("negative CPU on a node", _set(["nodes", 1, "cpu"], -4), "nodes[1].cpu: must be >= 0"),
    Bad(
        "a queue cycle",
        lambda d: d["queues"].extend([{"name": "x", "parent": "y"}, {"name": "y", "parent": "x"}]),
        "queues[2].parent: queue cycle",
    ),
    Bad(
        "an unknown parent queue",
        _set(["queues", 1, "parent"], "nowhere"),
        "queues[1].parent: unknown queue",
    ),
    Bad(
        "guarantee above deserved",
        _set(["queues", 1, "quota", "h100", "guarantee"], 12),
        "queues[1].quota.h100.guarantee: must be <= deserved",
    ),
    Bad(
        "deserved above capability",
        _set(["queues", 1, "quota", "h100", "deserved"], 20),
        "queues[1].quota.h100.deserved: must be <= capability",
    ),
    Bad(
        "children's guarantees beyond their parent's",
        lambda d: d["queues"].extend(
            [
                queue("org", deserved=4, guarantee=4),
                queue("t1", deserved=4, guarantee=3, parent="org"),
                queue("t2", deserved=4, guarantee=2, parent="org"),
            ]
        ),
        "queues[4].quota.h100.guarantee: the guarantees under org (5) exceed its own (4)",
    ),
    Bad(
        "guarantees beyond an ancestor's, through a queue without quota",
        lambda d: d["queues"].extend(
            [
                queue("org", deserved=4, guarantee=4),
                queue("dept", parent="org"),
                queue("t1", deserved=8, guarantee=6, parent="dept"),
            ]
        ),
        "queues[4].quota.h100.guarantee: the guarantees under org (6) exceed its own (4)",
    ),
    Bad(
        "a running workload without placement",
        lambda d: d["workloads"][0].pop("placement"),
        "workloads[0].placement: required",
    ),
    Bad(
        "a double-booked GPU",
        _append("workloads", workload("w2", gpus=1, on=[("n1", [3])])),
        "workloads[2].placement[0].gpus: GPU 3 of 'n1' double-booked",
    ),
    Bad(
        "a placement on a GPU the node does not have",
        _set(["workloads", 0, "placement", 0, "gpus"], [0, 1, 2, 9]),
        "workloads[0].placement[0].gpus[3]: 'n1' has no GPU 9",
    ),
    Bad(
        "a placement over the node's CPU",
        _set(["workloads", 0, "pod_sets", 0, "cpu"], 500),
        "workloads[0].placement[0].node: CPU of 'n1' over capacity",
    ),
    Bad(
        "submitted after it started",
        _set(["workloads", 0, "submitted_at"], "2026-11-29T09:59:00Z"),
        "workloads[0].submitted_at: must not be after started_at",
    ),
    Bad(
        "a time without a zone",
        _set(["now"], "2026-11-29T10:00:00"),
        "now: needs a time zone",
    ),
    Bad(
        "min_member above the pod count",
        _set(["workloads", 1, "min_member"], 3),
        "workloads[1].min_member: must be <= the 1 pods",
    ),
    Bad(
        "a workload on an inner queue",
        _set(["workloads", 1, "queue"], "root"),
        "workloads[1].queue: 'root' is not a leaf queue",
    ),
    Bad(
        "a duplicate workload name",
        _set(["workloads", 1, "name"], "w0"),
        "workloads[1].name: duplicate workload",
    ),
    Bad(
        "two default priority classes",
        _set(["priority_classes", 0, "default"], True),
        "priority_classes: need exactly one default",
    ),
    Bad(
        "a fraction on an exclusive flavor",
        _set(["workloads", 1, "pod_sets", 0, "gpu_milli"], 500),
        "workloads[1].pod_sets[0].gpu_milli: only allowed on shared flavors",
    ),
    Bad(
        "an unknown topology",
        _set(["workloads", 1, "topology"], "rack"),
        "workloads[1].topology: must be null, 'domain' or 'preferred'",
    ),
    Bad(
        "a budget for an unknown class",
        _append("budgets", {"tenant": "team-a", "priority_class": "gold", "gpu_hours": 1}),
        "budgets[0].priority_class: unknown priority class",
    ),
    Bad(
        "an unknown MIG profile",
        _append(
            "flavors",
            {
                "name": "a100-9g",
                "sharing": "exclusive",
                "mig": {"gpu_model": "a100-40gb", "profile": "9g.90gb"},
            },
        ),
        "flavors[3].mig.profile: unknown MIG profile",
    ),
    Bad(
        "MIG slices exceeding the card",
        lambda d: (
            d["flavors"].append(
                {"name": "a100-3g", "mig": {"gpu_model": "a100-40gb", "profile": "3g.20gb"}}
            ),
            d["nodes"].append({**node("m1", gpus=5, flavor="a100-3g"), "physical_gpus": 2}),
        ),
        "nodes[2].gpus: 5 3g.20gb slices exceed 2 a100-40gb cards",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_malformed_scenario_is_refused_naming_the_field(case: Bad) -> None:
    """The error message starts with the path of the offending field."""
    data = copy.deepcopy(base())
    case.mutate(data)
    with pytest.raises(ScenarioError) as error:
        scenario_from_dict(data)
    assert str(error.value).startswith(case.message), str(error.value)


def test_the_base_scenario_is_valid() -> None:
    """The cases above each break a scenario that is otherwise accepted."""
    loaded = scenario_from_dict(base())
    assert len(loaded.snapshot.workloads) == 2


def test_guarantees_beyond_the_healthy_pool_are_planned_not_refused() -> None:
    """Whether the pool backs the guarantees is for the quota tree, not the reader: the pool
    may lose GPUs under guarantees that once fitted (test_failed_gpus.py)."""
    data = base()
    data["queues"][1]["quota"]["h100"] = {"guarantee": 24, "deserved": 24, "capability": 24}
    assert scenario_from_dict(data).snapshot.queues[1].quota["h100"].guarantee == 24_000


def test_a_valid_mig_layout_is_accepted() -> None:
    """Seven 1g.5gb slices fit one A100 40GB card."""
    data = base()
    data["flavors"].append(
        {"name": "a100-1g", "mig": {"gpu_model": "a100-40gb", "profile": "1g.5gb"}}
    )
    data["nodes"].append({**node("m1", gpus=7, flavor="a100-1g"), "physical_gpus": 1})
    assert scenario_from_dict(data).snapshot.nodes[-1].gpus == 7


def test_a_policy_object_is_read_on_its_own_with_the_defaults() -> None:
    """`policy_from_dict` reads the scenario format's policy object alone (what-if proposals):
    absent keys take the defaults, errors name policy.<key>."""
    assert policy_from_dict({}) == PolicyInfo()
    assert policy_from_dict({"queueing": "fifo", "preemption_backoff": None}) == PolicyInfo(
        queueing="fifo", backoff=None
    )
    with pytest.raises(ScenarioError, match=r"^policy\.victim_search: must be"):
        policy_from_dict({"victim_search": "kind"})
    with pytest.raises(ScenarioError, match=r"^policy: must be an object"):
        policy_from_dict(["fifo"])
