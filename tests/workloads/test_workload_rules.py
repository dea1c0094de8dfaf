"""Workloads: leaf queues, gang minimum, protected runtime, pod sets and placements."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from domain_builders import flavor, node, priority_class, queue

from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import PodSet, Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool() -> dict[str, object]:
    h100 = flavor("h100")
    l40s = flavor("l40s", sharing="shared", gpu_memory_gb=48)
    root = queue("root")
    return {
        "h100": h100,
        "l40s": l40s,
        "n1": node("n1", h100, gpus=8, unhealthy_gpus=[7]),
        "s1": node("s1", l40s, gpus=4),
        "root": root,
        "team": queue("team", parent=root, max_protected_runtime_s=3600),
        "normal": priority_class("normal", default=True),
        "high": priority_class("high", value=100, budget_rate=Decimal(1)),
    }


def submit(pool: dict, **fields: object) -> Workload:
    values: dict = {"queue": pool["team"], "pod_sets": [PodSetSpec(2, gpus=8, flavor=pool["h100"])]}
    return do_submit_workload("w1", **(values | fields))


def test_a_workload_takes_the_default_class_and_the_queue_protection(pool: dict) -> None:
    pool["team"].default_protected_runtime_s = 1800
    pool["team"].save()
    made = submit(pool)
    assert made.priority_class == pool["normal"]
    assert made.protected_runtime_s == 1800
    assert made.effective_min_member() == 2
    assert made.transitions.get().to_state == "pending"


def test_workloads_go_to_leaf_queues(pool: dict) -> None:
    with pytest.raises(ValidationError) as error:
        submit(pool, queue=pool["root"])
    assert "queue" in error.value.message_dict
    assert not Workload.objects.exists()


def test_min_member_may_not_exceed_the_pods(pool: dict) -> None:
    with pytest.raises(ValidationError) as error:
        submit(pool, min_member=3)
    assert "min_member" in error.value.message_dict
    assert not Workload.objects.exists() and not PodSet.objects.exists()
    assert submit(pool, min_member=1).effective_min_member() == 1


def test_a_min_member_above_one_pod_says_pod(pool: dict) -> None:
    one = [PodSetSpec(1, gpus=8, flavor=pool["h100"])]
    with pytest.raises(ValidationError) as error:
        submit(pool, pod_sets=one, min_member=2)
    assert error.value.message_dict["min_member"] == [
        "min_member (2) exceeds the workload's 1 pod"  # "1 pods" before
    ]


def test_free_protection_is_capped_by_the_queue(pool: dict) -> None:
    with pytest.raises(ValidationError) as error:
        submit(pool, protected_runtime_s=7200)
    assert "protected_runtime_s" in error.value.message_dict
    # a budgeted class may protect for longer: it pays for it
    assert submit(pool, protected_runtime_s=7200, priority_class=pool["high"]).pk


def test_an_unknown_topology_is_refused(pool: dict) -> None:
    with pytest.raises(ValidationError) as error:
        submit(pool, topology="rack")
    assert "topology" in error.value.message_dict


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"gpus": 1}, "flavor"),
        ({"gpus": 1, "flavor": "l40s"}, "gpu_milli"),
        ({"gpus": 2, "flavor": "l40s", "gpu_milli": 500}, "gpus"),
        ({"gpus": 1, "flavor": "h100", "gpu_milli": 500}, "gpu_milli"),
        ({"gpus": 1, "flavor": "l40s", "gpu_milli": 1001}, "gpu_milli"),
        ({"count": 0}, "count"),
    ],
    ids=[
        "GPUs without flavor",
        "shared without fraction",
        "shared asking two GPUs",
        "fraction on exclusive",
        "fraction above 1000",
        "no pods",
    ],
)
def test_a_bad_pod_set_is_refused_naming_the_field(pool: dict, spec: dict, field: str) -> None:
    values = {"count": 1} | spec
    if "flavor" in values:
        values["flavor"] = pool[values["flavor"]]
    with pytest.raises(ValidationError) as error:
        submit(pool, pod_sets=[PodSetSpec(1, name="first"), PodSetSpec(**values)])
    assert f"pod_sets.1.{field}" in error.value.message_dict
    assert not Workload.objects.exists()


def test_cpu_only_pods_need_no_flavor(pool: dict) -> None:
    made = submit(pool, pod_sets=[PodSetSpec(4, cpu=8, memory_gb=32)])
    assert made.pod_sets.get().gpu_equivalent_per_pod() == 0


def test_a_shared_pod_counts_its_fraction(pool: dict) -> None:
    made = submit(pool, pod_sets=[PodSetSpec(1, gpus=1, flavor=pool["l40s"], gpu_milli=470)])
    assert made.pod_sets.get().gpu_equivalent_per_pod() == Decimal("0.47")


def test_the_database_refuses_gpus_without_flavor_and_bad_gang(pool: dict) -> None:
    made = submit(pool)
    with pytest.raises(IntegrityError), transaction.atomic():
        PodSet.objects.create(workload=made, name="extra", count=1, gpus=2)
    with pytest.raises(IntegrityError), transaction.atomic():
        Workload.objects.filter(pk=made.pk).update(min_member=0)


def placement(pool: dict, **fields: object) -> PlacementSpec:
    values: dict = {"pod_set": "main", "pod_index": 0, "node": pool["n1"], "gpu_indices": [0]}
    return PlacementSpec(**(values | fields))


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"gpu_indices": [8]}, "gpu_indices"),
        ({"gpu_indices": [0, 0]}, "gpu_indices"),
        ({"gpu_indices": [0, 1]}, "gpu_indices"),
        ({"node": "s1", "gpu_indices": [0]}, "node"),
        ({"pod_index": 1}, "pod_index"),
        ({"milli": 500}, "milli"),
    ],
    ids=["no such GPU", "repeated GPU", "more GPUs than asked", "wrong flavor", "no such pod",
         "milli on exclusive"],
)  # fmt: skip
def test_a_bad_placement_is_refused_naming_the_field(pool: dict, fields: dict, field: str) -> None:
    made = submit(pool, pod_sets=[PodSetSpec(1, gpus=1, flavor=pool["h100"])])
    if fields.get("node") == "s1":
        fields["node"] = pool["s1"]
    with pytest.raises(ValidationError) as error:
        do_transition_workload(
            made, "admitted", reason="fits", placements=[placement(pool, **fields)]
        )
    assert field in error.value.message_dict
    made.refresh_from_db()
    assert made.state == "pending" and not made.placements.exists()
