"""The rule of submission as pods from the cluster meet it (``pod_sets_errors``): by field, as
``do_submit_workload`` names it, each distinct pod set judged once when the caller keeps the
verdicts (the cluster's sync judges thousands of pods a cycle)."""

from typing import Any

import pytest
from domain_builders import flavor, node

from gpupool.scheduler.scenario import MAX_POD_SETS
from gpupool.workloads.actions import PodSetSpec, pod_sets_errors

pytestmark = pytest.mark.django_db


def test_pod_sets_errors_names_each_pod_set_and_judges_equal_ones_once(
    django_assert_num_queries: Any,
) -> None:
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    sets = [PodSetSpec(2, gpus=8, flavor=h100), PodSetSpec(1, gpus=9, flavor=h100, name="b")]
    judged: dict[tuple[object, ...], dict[str, str]] = {}
    with django_assert_num_queries(2):  # the nodes of each distinct pod set, once
        errors = pod_sets_errors(sets, judged)
        assert pod_sets_errors([PodSetSpec(5, gpus=9, flavor=h100)], judged) == {
            "pod_sets.0.gpus": errors["pod_sets.1.gpus"]
        }
    assert errors == {
        "pod_sets.1.gpus": "9 GPUs per pod, and a pod runs on one node: the largest h100 node has 8"
    }
    many = [PodSetSpec(1, gpus=1, flavor=h100, name=f"p{i}") for i in range(MAX_POD_SETS + 1)]
    assert pod_sets_errors(many) == {
        "pod_sets": f"{MAX_POD_SETS + 1} pod sets: at most {MAX_POD_SETS}"
    }
