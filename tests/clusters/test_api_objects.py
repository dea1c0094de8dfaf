"""API objects become facts: quantities exact, pod requests added up as kube-scheduler does."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest
from cluster_builders import node_object, pod_object

from gpupool.clusters import quantities
from gpupool.clusters.api_objects import (
    foreign_pod_usage,
    job_facts,
    node_facts,
    pod_facts,
    pod_requests,
    pod_resource_requests,
    resource_amounts,
)
from gpupool.clusters.base import NodeSelectorTerm, SelectorRequirement, Taint, Toleration


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", Fraction(1, 2)), ("2", Fraction(2)), ("1.5", Fraction(3, 2)),
     ("64Gi", Fraction(64 * 2**30)), ("1G", Fraction(10**9)), ("1e3", Fraction(1000)),
     ("1E-3", Fraction(1, 1000)), ("100k", Fraction(100_000)), (".5", Fraction(1, 2)),
     ("250u", Fraction(1, 4000))],
    ids=lambda value: str(value),
)  # fmt: skip
def test_quantities_parse_exactly(text: str, value: Fraction) -> None:
    assert quantities.parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1Zi", "1e999999999", "--1", "1 Gi", "x" * 100])
def test_what_is_no_quantity_is_refused(text: str) -> None:
    with pytest.raises(quantities.QuantityError):
        quantities.parse_quantity(text)


def test_requests_round_up_and_capacity_rounds_down() -> None:
    assert quantities.memory_mib("1G", round_up=True) == 954
    assert quantities.memory_mib("1G", round_up=False) == 953
    assert quantities.cpu_milli("0.0001", round_up=True) == 1


def containers(*requests: dict[str, str], sidecar: bool = False) -> list[dict[str, Any]]:
    """Containers asking for ``requests`` each (sidecars: restartable init containers)."""
    result = []
    for index, asked in enumerate(requests):
        container: dict[str, Any] = {"name": f"c{index}", "resources": {"requests": asked}}
        if sidecar:
            container["restartPolicy"] = "Always"
        result.append(container)
    return result


REQUEST_CASES: list[tuple[str, dict[str, Any], dict[str, Fraction]]] = [
    ("containers add up",
     {"containers": containers({"cpu": "1"}, {"cpu": "500m", "nvidia.com/gpu": "2"})},
     {"cpu": Fraction(3, 2), "nvidia.com/gpu": Fraction(2)}),
    ("a larger init container sets the request",
     {"containers": containers({"cpu": "1"}), "initContainers": containers({"cpu": "4"})},
     {"cpu": Fraction(4)}),
    ("a smaller init container changes nothing",
     {"containers": containers({"cpu": "2"}), "initContainers": containers({"cpu": "1"})},
     {"cpu": Fraction(2)}),
    ("a sidecar adds to the containers and to later init containers",
     {"containers": containers({"cpu": "1"}),
      "initContainers": [*containers({"cpu": "1"}, sidecar=True),
                         *containers({"cpu": "3"})]},
     {"cpu": Fraction(4)}),
    ("overhead comes on top",
     {"containers": containers({"cpu": "1"}), "overhead": {"cpu": "250m"}},
     {"cpu": Fraction(5, 4)}),
    ("pod-level requests replace the containers' cpu and memory",
     {"containers": containers({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}),
      "resources": {"requests": {"cpu": "8", "memory": "2Gi"}}},
     {"cpu": Fraction(8), "memory": Fraction(2 * 2**30), "nvidia.com/gpu": Fraction(1)}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "expected"),
    [case[1:] for case in REQUEST_CASES],
    ids=[case[0] for case in REQUEST_CASES],
)
def test_pod_requests_follow_kube_schedulers_rule(
    spec: dict[str, Any], expected: dict[str, Fraction]
) -> None:
    assert pod_resource_requests(spec) == expected


@pytest.mark.parametrize(
    "spec", [case[1] for case in REQUEST_CASES], ids=[case[0] for case in REQUEST_CASES]
)
def test_requests_remembered_for_pods_that_ask_alike_equal_requests_worked_out(
    spec: dict[str, Any],
) -> None:
    worked_out = resource_amounts(pod_resource_requests(spec), round_up=True)
    assert pod_requests(spec) == worked_out
    assert pod_requests(copy.deepcopy(spec)) == worked_out  # the second: remembered


@pytest.mark.parametrize(
    "spec",
    [
        {"containers": containers({"cpu": True})},  # equal to 1 as a key, no quantity
        {"containers": containers({"cpu": "1x"})},
        {"containers": [{"name": "c", "resources": ""}]},
        {"containers": [{"name": "c", "resources": {"requests": ["cpu"]}}]},
        {"containers": {"name": "c"}},
        {"containers": containers({"cpu": "1"}), "overhead": "1"},
    ],
)
def test_requests_of_a_malformed_spec_are_refused_even_after_a_like_valid_one(
    spec: dict[str, Any],
) -> None:
    assert pod_requests({"containers": containers({"cpu": 1})}).cpu_milli == 1000
    assert pod_requests({"containers": containers({"cpu": "1"})}).cpu_milli == 1000
    with pytest.raises((ValueError, quantities.QuantityError)):
        resource_amounts(pod_resource_requests(spec), round_up=True)
    with pytest.raises((ValueError, quantities.QuantityError)):
        pod_requests(spec)


def test_mig_resources_are_counted_by_profile() -> None:
    amounts = resource_amounts(
        {"nvidia.com/mig-3g.40gb": Fraction(2), "nvidia.com/mig-1g.10gb": Fraction(0)},
        round_up=True,
    )
    assert dict(amounts.mig) == {"3g.40gb": 2}


def test_a_pod_object_becomes_facts() -> None:
    obj = pod_object(
        "w-0",
        workload="w",
        gpus=8,
        node="n1",
        phase="Running",
        annotations={"gpupool.io/min-member": "2", "kubectl.kubernetes.io/last-applied": "{}"},
        node_selector={"zone": "a"},
        terms=[{"matchExpressions": [{"key": "k", "operator": "Exists"}]}],
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        owner=("Job", "w"),
    )
    obj["status"]["startTime"] = "2026-11-29T09:30:00Z"
    facts = pod_facts(obj)
    assert (facts.namespace, facts.name, facts.uid) == ("team-a", "w-0", "uid-team-a-w-0")
    assert (facts.node_name, facts.phase, facts.scheduler_name) == ("n1", "Running", "gpupool")
    assert (facts.requests.gpus, facts.requests.cpu_milli, facts.requests.memory_mib) == (
        8,
        1000,
        1024,
    )
    assert dict(facts.annotations) == {"gpupool.io/min-member": "2"}  # only gpupool.io/*
    assert dict(facts.node_selector) == {"zone": "a"}
    assert facts.required_node_affinity == (
        NodeSelectorTerm(match_expressions=(SelectorRequirement("k", "Exists"),)),
    )
    assert facts.tolerations == (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),)
    assert (facts.owner_kind, facts.owner_name) == ("Job", "w")
    assert facts.started_at == facts.created_at + 30 * 60


def test_a_node_object_becomes_facts() -> None:
    obj = node_object(
        "n1",
        gpus=8,
        healthy_gpus=7,
        taints=[{"key": "dedicated", "value": "nlp", "effect": "NoSchedule"}],
        unschedulable=True,
    )
    facts = node_facts(obj)
    assert (facts.allocatable.gpus, facts.capacity.gpus, facts.max_pods) == (7, 8, 110)
    assert facts.taints == (Taint("dedicated", "nlp", "NoSchedule"),)
    assert (facts.unschedulable, facts.ready) == (True, True)
    assert facts.gpu_product == "NVIDIA-H100-80GB-HBM3"


def test_another_schedulers_pod_holds_capacity_only_while_bound_and_not_ended() -> None:
    bound = pod_object("web", scheduler="default-scheduler", node="n1", gpus=1, phase="Running")
    usage = foreign_pod_usage(bound)
    assert usage is not None
    assert (usage[0], usage[1].gpus, usage[1].cpu_milli) == ("n1", 1, 1000)
    assert foreign_pod_usage(pod_object("web", scheduler="default-scheduler")) is None
    ended = pod_object("web", scheduler="default-scheduler", node="n1", phase="Succeeded")
    assert foreign_pod_usage(ended) is None


def test_an_object_with_a_wrong_shape_is_refused_with_value_error() -> None:
    with pytest.raises(ValueError):
        pod_facts({"metadata": {"name": "p"}, "spec": {"containers": "nope"}})


def _job(scheduler: str = "gpupool", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "nlp", "uid": "u-1"},
        "spec": {"template": {"spec": {"schedulerName": scheduler, "containers": []}}},
        "status": status,
    }


def _condition(kind: str, reason: str = "", message: str = "", status: str = "True") -> Any:
    return {"type": kind, "status": status, "reason": reason, "message": message}


def test_a_job_of_gpupool_pods_becomes_facts_and_another_schedulers_job_none() -> None:
    facts = job_facts(_job(active=1, failed=2, uncountedTerminatedPods={"failed": ["x"]}))
    assert facts is not None
    assert (str(facts.key), facts.uid, facts.state, facts.active, facts.failed) == (
        "nlp/train",
        "u-1",
        "active",
        1,
        3,  # two counted, one ended pod the controller has seen but not counted yet
    )
    assert job_facts(_job("default-scheduler")) is None
    assert job_facts({**_job(), "spec": {"template": {"spec": {}}}}) is None


def test_a_jobs_workload_is_its_templates_workload_label() -> None:
    """The workload a Job's pods join is known from the Job alone, before or between its pods."""
    labelled = _job()
    labelled["spec"]["template"]["metadata"] = {"labels": {"gpupool.io/workload": "bert"}}
    facts = job_facts(labelled)
    assert facts is not None and facts.workload == "bert"
    plain = job_facts(_job())
    assert plain is not None and plain.workload == ""


@pytest.mark.parametrize(
    ("conditions", "state", "reason"),
    [
        ([_condition("Failed", "BackoffLimitExceeded", "limit")], "failed", "BackoffLimitExceeded"),
        ([_condition("FailureTarget", "DeadlineExceeded")], "failed", "DeadlineExceeded"),
        ([_condition("SuccessCriteriaMet", "Reached")], "complete", "Reached"),
        (
            [_condition("SuccessCriteriaMet", "A"), _condition("Complete", "B")],
            "complete",
            "B",
        ),
        ([_condition("Failed", "BackoffLimitExceeded", status="False")], "active", ""),
        ([_condition("Suspended", "JobSuspended")], "active", ""),
    ],
)
def test_a_jobs_verdict_comes_from_its_conditions(
    conditions: list[Any], state: str, reason: str
) -> None:
    facts = job_facts(_job(conditions=conditions))
    assert facts is not None and (facts.state, facts.reason) == (state, reason)


def test_a_failed_jobs_words_carry_its_reason_and_message() -> None:
    facts = job_facts(
        _job(conditions=[_condition("Failed", "BackoffLimitExceeded", "reached the limit")])
    )
    assert facts is not None
    assert facts.words() == "its Job nlp/train failed (BackoffLimitExceeded: reached the limit)"
