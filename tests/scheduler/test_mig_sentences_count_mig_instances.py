"""A MIG flavor's quantities count MIG instances, and the core's sentences say so.

A walk of the product read "Queue nlp has 11 a100-3g.40gb GPUs of quota available" of a MIG
flavor, where the pages, the API and the CLI say "MIG instances" ("1 MIG instance"): its
quota, capacity and asks count the slices cut from its cards, never GPUs. Every sentence of
``scheduler.explain`` that states a quantity of a flavor says it through one helper
(``explain.flavor_amount``) in the flavor's unit, which the snapshot gives
(``FlavorInfo.mig``, ``explain.flavor_units``): "MIG instance(s)" for a MIG flavor, "GPU(s)"
otherwise, singular for exactly 1. The dry-run's layers say the same; a lent share names its
flavor in the facts (``lent_flavor``) so its amount is said in that flavor's unit too."""

from __future__ import annotations

import re
from typing import Any

import pytest
from scheduler_builders import Case, node, queue, run_case, scenario, workload

from gpupool.scheduler.estimate import dry_run
from gpupool.scheduler.explain import (
    GPU_UNIT,
    MIG_UNIT,
    Verdict,
    explanation,
    flavor_amount,
    flavor_units,
    flavors_named,
)
from gpupool.scheduler.scenario import scenario_from_dict
from gpupool.scheduler.types import PendingExplanation, PendingReason, Plan, WorkloadInfo

MIG = "a100-3g.40gb"
FLAVORS: list[dict[str, Any]] = [
    {"name": "h100", "sharing": "exclusive", "gpu_memory_gb": 80, "hourly_price": 2.5},
    {
        "name": MIG,
        "sharing": "exclusive",
        "gpu_memory_gb": 40,
        "hourly_price": 1.2,
        "mig": {"gpu_model": "A100-80GB", "profile": "3g.40gb"},
    },
]
UNITS = {MIG: MIG_UNIT}
GPU_WORD = re.compile(r"\bGPUs?\b")


def mig_node(name: str, instances: int = 8, **options: Any) -> dict[str, Any]:
    """A node of four A100 80GB cards cut in two 3g.40gb halves each: 8 MIG instances."""
    return {**node(name, gpus=instances, flavor=MIG, **options), "physical_gpus": instances // 2}


def pending(result: Plan, name: str) -> PendingExplanation:
    return next(p for p in result.pending if p.workload == name)


def test_the_snapshot_says_which_flavors_count_mig_instances() -> None:
    loaded = Case("units", [mig_node("m1"), node("n1")], [], [], flavors=FLAVORS).load()
    assert flavor_units(loaded.snapshot.flavors) == {MIG: MIG_UNIT}
    assert flavor_amount("11", MIG, UNITS) == "11 a100-3g.40gb MIG instances"
    assert flavor_amount("1", MIG, UNITS) == "1 a100-3g.40gb MIG instance"
    assert (
        flavor_amount("0", MIG, UNITS, "healthy free")
        == "0 healthy free a100-3g.40gb MIG instances"
    )
    assert flavor_amount("1", "h100", UNITS) == "1 h100 GPU"
    assert flavor_amount("2", "h100", UNITS, named=False) == "2 GPUs"
    # a list of flavors counts MIG instances only where each is a MIG flavor
    assert flavor_amount("3", [MIG, "h100"], UNITS) == "3 a100-3g.40gb or h100 GPUs"
    assert flavor_amount("3", [MIG, MIG], UNITS, named=False) == "3 MIG instances"


def test_a_mig_queues_quota_sentence_counts_mig_instances() -> None:
    """The walk's sentence: nlp's 15 deserved, 4 of them running, 11 left for a 12-instance
    job; the h100 job beside it is still told GPUs."""
    result = run_case(
        Case(
            "mig quota",
            [mig_node("m1"), mig_node("m2"), node("n1")],
            [
                queue("nlp", deserved=15, flavor=MIG),
                queue("hq", deserved=8),
            ],
            [
                workload("running", "nlp", gpus=4, flavor=MIG, on=[("m1", [0, 1, 2, 3])]),
                workload("big", "nlp", gpus=1, count=12, flavor=MIG),
                workload("h-running", "hq", gpus=4, on=[("n1", [0, 1, 2, 3])]),
                workload("h", "hq", gpus=8),
            ],
            flavors=FLAVORS,
            want_reasons={"big": "quota", "h": "quota"},
        )
    )
    big = pending(result, "big")
    assert big.detail.startswith(
        "Queue nlp has 11 a100-3g.40gb MIG instances of quota available, 12 asked"
    ), big.detail
    assert not GPU_WORD.search(big.detail), big.detail
    assert big.facts["available_gpus"] == 11  # the facts keep their keys and numbers
    assert "4 h100 GPUs of quota available, 8 asked" in pending(result, "h").detail


def test_one_mig_instance_is_singular() -> None:
    result = run_case(
        Case(
            "one instance left",
            [mig_node("m1")],
            [queue("cv", deserved=7, flavor=MIG)],
            [
                workload("running", "cv", gpus=6, flavor=MIG, on=[("m1", [0, 1, 2, 3, 4, 5])]),
                workload("two", "cv", gpus=2, flavor=MIG),
            ],
            flavors=FLAVORS,
            want_reasons={"two": "quota"},
        )
    )
    assert "Queue cv has 1 a100-3g.40gb MIG instance of quota available, 2 asked" in (
        pending(result, "two").detail
    )


def test_a_mig_capacity_sentence_counts_mig_instances() -> None:
    result = run_case(
        Case(
            "mig capacity",
            [mig_node("m1")],
            [queue("cv", deserved=16, capability=16, flavor=MIG)],
            [
                workload("running", "cv", gpus=4, flavor=MIG, on=[("m1", [0, 1, 2, 3])]),
                workload("gang", "cv", gpus=4, count=2, flavor=MIG),
            ],
            flavors=FLAVORS,
            want_reasons={"gang": "capacity"},
        )
    )
    gang = pending(result, "gang")
    assert gang.detail == "The pool has 4 healthy free a100-3g.40gb MIG instances, 8 asked.", gang


def test_a_mig_flavors_lent_share_counts_mig_instances() -> None:
    """second lent its whole MIG share to first, whose work is protected until 11:00: the
    amount lent is the MIG flavor's (``lent_flavor``), said in MIG instances."""
    result = run_case(
        Case(
            "lent mig share",
            [mig_node("m1"), mig_node("m2")],
            [
                queue("first", deserved=8, capability=16, flavor=MIG),
                queue("second", deserved=8, capability=16, flavor=MIG),
            ],
            [
                workload(
                    "f1",
                    "first",
                    flavor=MIG,
                    on=[("m1", list(range(8)))],
                    started="09:00",
                    protected_s=7200,
                ),
                workload(
                    "f2",
                    "first",
                    flavor=MIG,
                    on=[("m2", list(range(8)))],
                    started="09:30",
                    protected_s=7200,
                ),
                workload("s1", "second", flavor=MIG),
            ],
            flavors=FLAVORS,
        )
    )
    s1 = pending(result, "s1")
    assert s1.facts["lent_gpus"] == 8 and s1.facts["lent_flavor"] == MIG
    assert "Its queue lent 8 MIG instances of its share to first" in s1.detail, s1.detail
    assert not GPU_WORD.search(s1.detail), s1.detail
    assert flavors_named(s1.facts) == {MIG}


def test_the_dry_runs_layers_count_mig_instances() -> None:
    """A 12-instance job on nlp, whose quota has 11 left and whose pool has 12 free: the
    quota layer fails in MIG instances; the capacity and placement layers pass."""
    loaded = scenario_from_dict(
        scenario(
            [mig_node("m1"), mig_node("m2")],
            [queue("nlp", deserved=15, flavor=MIG)],
            [workload("running", "nlp", gpus=4, flavor=MIG, on=[("m1", [0, 1, 2, 3])])],
            flavors=FLAVORS,
        )
    )
    hypothetical = scenario_from_dict(
        scenario(
            [mig_node("m1"), mig_node("m2")],
            [queue("nlp", deserved=15, flavor=MIG)],
            [workload("ask", "nlp", gpus=1, count=12, flavor=MIG)],
            flavors=FLAVORS,
        )
    ).snapshot.workloads[0]
    assert isinstance(hypothetical, WorkloadInfo)
    answer = dry_run(loaded.snapshot, loaded.policy, loaded.now, hypothetical)
    quota = answer.layers[0]
    assert (quota.layer, quota.passes) == ("quota", False)
    assert quota.detail.startswith(
        "Queue nlp has 11 a100-3g.40gb MIG instances of quota available, 12 asked"
    ), quota.detail
    bigger = scenario_from_dict(
        scenario(
            [mig_node("m1"), mig_node("m2")],
            [queue("nlp", deserved=15, flavor=MIG)],
            [workload("ask", "nlp", gpus=1, count=20, flavor=MIG)],
            flavors=FLAVORS,
        )
    ).snapshot.workloads[0]
    never = dry_run(loaded.snapshot, loaded.policy, loaded.now, bigger)
    assert never.never == (
        "Queue nlp can never hold 20 a100-3g.40gb MIG instances: the capabilities on its path "
        "allow 15."
    )
    capacity = never.layers[1]
    assert capacity.detail == "The pool has 12 healthy free a100-3g.40gb MIG instances, 20 asked."
    for layer in (*answer.layers, *never.layers):
        assert not GPU_WORD.search(layer.detail), layer


SCALED = {
    "queue": "nlp",
    "flavor": MIG,
    "guarantee_gpus": 4.0,
    "scaled_gpus": 2.0,
    "backed_by": None,
    "backing_gpus": 2.0,
    "guaranteed_gpus": 4.0,
}

# Every sentence that states a quantity of a flavor, of a MIG flavor: (reason, facts, words).
SENTENCES: list[tuple[PendingReason, dict[str, object], str]] = [
    (
        "quota",
        {"queue": "nlp", "flavor": MIG, "asked_gpus": 12.0, "available_gpus": 11.0},
        "Queue nlp has 11 a100-3g.40gb MIG instances of quota available, 12 asked;",
    ),
    (
        "quota",
        {
            "queue": "nlp",
            "flavor": MIG,
            "asked_gpus": 1.0,
            "available_gpus": 0.0,
            "never_fits": True,
        },
        "Queue nlp can never hold 1 a100-3g.40gb MIG instance:",
    ),
    (
        "capacity",
        {"flavor": MIG, "resource": "gpu", "free": 1.0, "asked": 2},
        "The pool has 1 healthy free a100-3g.40gb MIG instance, 2 asked.",
    ),
    (
        "capacity",
        {"flavor": MIG, "resource": "gpu", "healthy": 6.0, "asked": 8, "never_fits": True},
        "The pool has only 6 healthy a100-3g.40gb MIG instances; 8 asked.",
    ),
    (
        "capacity",
        {"flavor": MIG, "allowed_nodes": 1, "allowed_gpus": 8.0, "asked": 9},
        "tolerations allow has 8 healthy MIG instances; it asks 9.",
    ),
    (
        "capacity",
        {"flavor": MIG, "asked_pod_gpus": 9.0, "largest_pod_gpus": 8.0},
        "no node has 9 healthy a100-3g.40gb MIG instances for one pod; the largest has 8.",
    ),
    (
        "topology",
        {"flavor": MIG, "largest_domain_gpus": 8, "asked": 16.0, "never_fits": True},
        "the largest a100-3g.40gb domain has 8 healthy MIG instances; it asks 16.",
    ),
    (
        "capacity",  # as an explanation written before it was ``topology`` says it
        {"flavor": MIG, "largest_domain_gpus": 8, "asked": 16.0, "never_fits": True},
        "the largest a100-3g.40gb domain has 8 healthy MIG instances; it asks 16.",
    ),
    (
        "topology",
        {"flavor": MIG, "pods": 2, "free_in_one_domain_gpus": 1.0, "topology": "domain"},
        "(at most 1 a100-3g.40gb MIG instance is free in one)",
    ),
    (
        "fragmentation",
        {"flavor": MIG, "pods": 1, "minimum": 1, "free_gpus": 5.0},
        "5 a100-3g.40gb MIG instances are free in all, but no node has room for its pod",
    ),
    (
        "fragmentation",
        {
            "flavor": MIG,
            "pods": 3,
            "minimum": 3,
            "free_gpus": 9.0,
            "topology": "domain",
            "free_in_one_domain_gpus": 1.0,
            "largest_placeable": 1,
        },
        "At most 1 a100-3g.40gb MIG instance is free in one NVLink domain (9 in all)",
    ),
    (
        "behind",
        {"queue": "nlp", "flavor": MIG, "resource": "quota", "asked": 4, "free": 1},
        ": 1 a100-3g.40gb MIG instance of quota left, 4 asked;",
    ),
    (
        "quota",
        {
            "queue": "nlp",
            "flavor": MIG,
            "asked_gpus": 4.0,
            "available_gpus": 0.0,
            "scaled_guarantee": SCALED,
        },
        "Queue nlp's guarantee of 4 a100-3g.40gb MIG instances is scaled down to 2 while the "
        "pool's 2 healthy a100-3g.40gb MIG instances cannot back the 4 guaranteed.",
    ),
    (
        "behind",
        {
            "queue": "nlp",
            "lent_gpus": 1.0,
            "lent_flavor": MIG,
            "lent_to": ["cv"],
            "cannot_reclaim": "never",
        },
        "Its queue lent 1 MIG instance of its share to cv that cannot be taken back now",
    ),
    (
        "budget",
        {
            "tenant": "nlp",
            "priority_class": "high",
            "remaining_gpu_hours": 0.0,
            "reservation_gpu_hours": 2.0,
            "then": "quota",
            "then_facts": {
                "queue": "nlp",
                "flavor": MIG,
                "asked_gpus": 2.0,
                "available_gpus": 1.0,
            },
        },
        "Queue nlp has 1 a100-3g.40gb MIG instance of quota available, 2 asked;",
    ),
]


@pytest.mark.parametrize(
    ("reason", "facts", "said"), SENTENCES, ids=[f"{s[0]}-{i}" for i, s in enumerate(SENTENCES)]
)
def test_every_sentence_counts_a_mig_flavors_quantities_in_mig_instances(
    reason: PendingReason, facts: dict[str, object], said: str
) -> None:
    mig = explanation("w", Verdict(reason, facts), 1, UNITS).detail
    assert said in mig, mig
    # GPU-hours are a budget's unit, not a flavor's
    assert not GPU_WORD.search(mig.replace("GPU-hour", "")), mig
    # The same facts of a flavor that is not MIG say GPUs, as they did.
    plain = explanation("w", Verdict(reason, facts), 1).detail
    assert plain == mig.replace("MIG instance", "GPU"), plain
    assert MIG in flavors_named(facts)
    assert GPU_UNIT in plain
