"""A submission that could never run is refused, naming the field: a pod runs on one node, so
it asks no more GPUs than the largest node of its flavor holds, and nothing past the decision
core's bounds (or the pool's own snapshot could not be planned). A pod set of no GPUs is a
CPU-only one (a launcher), which the model, the core and the API all take."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from domain_builders import flavor, node, priority_class, queue, quota

from gpupool.clusters.grouping import MAX_PODS
from gpupool.inventory.models import Node
from gpupool.scheduler.scenario import (
    MAX_GPUS_PER_NODE,
    MAX_NODE_CPU,
    MAX_POD_SETS,
)
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import PodSet, Workload, WorkloadTransition

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool() -> dict[str, object]:
    h100 = flavor("h100")
    b200 = flavor("b200", gpu_memory_gb=180)
    mig = flavor(
        "a100-3g.40gb",
        sharing="mig",
        gpu_model="A100-80GB",
        mig_profile="3g.40gb",
        gpu_memory_gb=40,
    )
    root = queue("root")
    team = queue("team", parent=root)
    quota(team, h100, 0, 16, 160)
    priority_class("normal", default=True)
    return {
        "h100": h100,
        "b200": b200,
        "mig": mig,
        "gb300": flavor("gb300", gpu_memory_gb=288),  # no node of it synced yet
        "n1": node("n1", h100, gpus=8, unhealthy_gpus=[7]),
        "n2": node("n2", h100, gpus=4),
        "big": node("big", b200, gpus=16),
        "m1": node("m1", mig, gpus=2, mig_layout={"3g.40gb": 2}),
        "team": team,
    }


def submit(pool: dict, *specs: PodSetSpec) -> Workload:
    return do_submit_workload("w1", queue=pool["team"], pod_sets=list(specs))


def refusal(pool: dict, *specs: PodSetSpec) -> dict[str, list[str]]:
    """Submit, expecting a refusal; nothing is written. Returns its fields' messages."""
    Workload.objects.all().delete()  # what an earlier step of the test submitted
    with pytest.raises(ValidationError) as error:
        submit(pool, *specs)
    assert not Workload.objects.exists() and not PodSet.objects.exists()
    assert not WorkloadTransition.objects.exists()
    return error.value.message_dict


def test_a_pod_asking_more_gpus_than_the_largest_node_of_its_flavor_is_refused(
    pool: dict,
) -> None:
    fields = refusal(pool, PodSetSpec(1, gpus=1000, flavor=pool["h100"]))
    # past the core's bound too: the flavor's rule all the same
    assert fields == {
        "pod_sets.0.gpus": [
            "1000 GPUs per pod, and a pod runs on one node: the largest h100 node has 8"
        ]
    }
    fields = refusal(
        pool,
        PodSetSpec(1, gpus=4, flavor=pool["h100"]),
        PodSetSpec(2, gpus=9, flavor=pool["h100"], name="b"),
    )
    assert fields == {
        "pod_sets.1.gpus": [
            "9 GPUs per pod, and a pod runs on one node: the largest h100 node has 8"
        ]
    }


def test_a_pod_of_the_largest_node_is_taken_even_with_a_broken_gpu(pool: dict) -> None:
    # n1 has 8 GPUs, one of them broken: it comes back, so 8 per pod can run one day
    assert submit(pool, PodSetSpec(1, gpus=8, flavor=pool["h100"])).pk


def test_a_node_gone_from_the_cluster_is_no_longer_the_largest(pool: dict) -> None:
    Node.objects.filter(name="n1").update(gone_at=pool["n1"].updated_at)
    fields = refusal(pool, PodSetSpec(1, gpus=8, flavor=pool["h100"]))
    assert "the largest h100 node has 4" in fields["pod_sets.0.gpus"][0]


def test_a_further_flavor_choice_with_a_larger_node_lets_the_pod_run(pool: dict) -> None:
    spec = PodSetSpec(1, gpus=16, flavor=pool["h100"], flavor_choices=[pool["b200"]])
    assert submit(pool, spec).pk
    fields = refusal(
        pool, PodSetSpec(1, gpus=17, flavor=pool["h100"], flavor_choices=[pool["b200"]])
    )
    assert "the largest h100 or b200 node has 16" in fields["pod_sets.0.gpus"][0]


def test_mig_instances_of_a_node_count_as_its_gpus(pool: dict) -> None:
    # m1: 2 cards cut into 2 instances of 3g.40gb each
    assert submit(pool, PodSetSpec(1, gpus=4, flavor=pool["mig"])).pk
    assert "pod_sets.0.gpus" in refusal(pool, PodSetSpec(1, gpus=5, flavor=pool["mig"]))


def test_a_flavor_without_nodes_yet_is_not_judged_but_the_cores_bound_holds(
    pool: dict,
) -> None:
    assert submit(pool, PodSetSpec(1, gpus=MAX_GPUS_PER_NODE, flavor=pool["gb300"])).pk
    fields = refusal(pool, PodSetSpec(1, gpus=MAX_GPUS_PER_NODE + 1, flavor=pool["gb300"]))
    assert f"at most {MAX_GPUS_PER_NODE}" in fields["pod_sets.0.gpus"][0]


def test_a_pod_past_the_cores_cpu_bound_is_refused(pool: dict) -> None:
    spec = PodSetSpec(1, gpus=1, flavor=pool["h100"], cpu=Decimal(MAX_NODE_CPU + 1))
    assert "pod_sets.0.cpu" in refusal(pool, spec)


def test_more_pod_sets_or_pods_than_the_core_takes_are_refused(pool: dict) -> None:
    many = [
        PodSetSpec(1, gpus=1, flavor=pool["h100"], name=f"p{i}") for i in range(MAX_POD_SETS + 1)
    ]
    assert "pod_sets" in refusal(pool, *many)
    half = MAX_PODS // 2 + 1
    fields = refusal(pool, PodSetSpec(half, name="a"), PodSetSpec(half, name="b"))
    assert f"{2 * half} pods in all; at most {MAX_PODS} pods a workload" in fields["pod_sets"][0]


def test_a_workload_over_its_queues_capability_waits_as_the_design_says(pool: dict) -> None:
    """DESIGN section 3, step 1 (enqueue): the cycle sets aside work no capability on its
    path could ever hold; it is not a malformed submission (an approved quota request may
    raise the capability), so it is taken: 30 pods of 8 h100 GPUs, 240 over a cap of 160."""
    assert submit(pool, PodSetSpec(30, gpus=8, flavor=pool["h100"])).state == "pending"


def test_a_pod_set_of_no_gpus_is_a_cpu_only_one_with_or_without_a_flavor(pool: dict) -> None:
    launcher = PodSetSpec(1, gpus=0, cpu=2, name="launcher")
    workers = PodSetSpec(2, gpus=8, flavor=pool["h100"], name="workers")
    assert submit(pool, launcher, workers).total_pods() == 3
    Workload.objects.all().delete()
    assert submit(pool, PodSetSpec(1, gpus=0, flavor=pool["h100"], cpu=2)).pk
