"""A count of one takes the singular, and so does its verb, in every sentence of
``scheduler.explain`` that counts nodes, pods, preemptions, GPU-hours or CPU cores, not only
GPUs (``test_one_gpu_is_singular.py``): "the 1 h100 node ... allow has", "caused 1
preemption", "1 of its pods does not exist yet". Other counts (0, 2, a missing ``?``) keep the
plural."""

from __future__ import annotations

import pytest

from gpupool.scheduler.explain import Verdict, explanation
from gpupool.scheduler.types import PendingReason

ALLOWED = {"flavor": "h100", "asked": 16, "allowed_gpus": 8}
BACKOFF = {"caused_by": "tenant", "window_s": 3600, "until": 0}
BUDGET = {
    "priority_class": "urgent",
    "tenant": "nlp",
    "reservation_gpu_hours": 4,
}
GANG = {"flavor": "h100", "free_gpus": 8, "pods": 4, "minimum": 4}


def detail(reason: PendingReason, facts: dict[str, object]) -> str:
    return explanation("w", Verdict(reason, facts), 1).detail


@pytest.mark.parametrize(
    ("reason", "facts", "said"),
    [
        (
            "capacity",
            {**ALLOWED, "allowed_nodes": 1},
            "It can never run as asked: the 1 h100 node its node selector, node affinity and "
            "tolerations allow has 8 healthy GPUs; it asks 16.",
        ),
        (
            "capacity",
            {**ALLOWED, "allowed_nodes": 2},
            "It can never run as asked: the 2 h100 nodes its node selector, node affinity and "
            "tolerations allow have 8 healthy GPUs; it asks 16.",
        ),
        ("gang", {"missing_pods": 1}, "1 of its pods does not exist yet."),
        ("gang", {"missing_pods": 2}, "2 of its pods do not exist yet."),
        (
            "fragmentation",
            {**GANG, "largest_placeable": 1},
            "8 h100 GPUs are free in all, but no set of nodes holds the gang: at most 1 of its "
            "4 pods fits (minimum 4).",
        ),
        (
            "fragmentation",
            {**GANG, "largest_placeable": 3},
            "8 h100 GPUs are free in all, but no set of nodes holds the gang: at most 3 of its "
            "4 pods fit (minimum 4).",
        ),
        (
            "topology",
            {"flavor": "gb200", "pods": 1},
            "No single NVLink domain holds its 1 pod; it would fit across domains, but it "
            "requires one.",
        ),
        (
            "capacity",
            {"any_node": True, "resource": "cpu", "asked": 1, "free": 0.5, "flavor": "cpu"},
            "It may run on any node, but no kind of node has 1 CPU core free: the most is 0.5 "
            "on cpu nodes.",
        ),
        (
            "capacity",
            {"any_node": True, "resource": "cpu", "asked": 2, "free": 1, "flavor": "cpu"},
            "It may run on any node, but no kind of node has 2 CPU cores free: the most is 1 "
            "on cpu nodes.",
        ),
        (
            "budget",
            {**BUDGET, "remaining_gpu_hours": 1},
            "Out of urgent budget (tenant nlp: 1 GPU-hour left; 4 needed to reserve its "
            "protected window): it competes at the default class.",
        ),
        (
            "budget",
            {**BUDGET, "remaining_gpu_hours": 0.5},
            "Out of urgent budget (tenant nlp: 0.5 GPU-hours left; 4 needed to reserve its "
            "protected window): it competes at the default class.",
        ),
    ],
)
def test_a_count_agrees_with_its_noun_and_verb(
    reason: PendingReason, facts: dict[str, object], said: str
) -> None:
    assert detail(reason, facts) == said


@pytest.mark.parametrize(
    ("preemptions", "said"),
    [
        (1, " Its tenant caused 1 preemption in the last 1 h:"),
        (4, " Its tenant caused 4 preemptions in the last 1 h:"),
        (None, " Its tenant caused ? preemptions in the last 1 h:"),
    ],
)
def test_a_back_off_counts_its_preemptions(preemptions: int | None, said: str) -> None:
    facts: dict[str, object] = {"queue": "q", "backoff": {**BACKOFF, "preemptions": preemptions}}
    assert said in detail("behind", facts)
