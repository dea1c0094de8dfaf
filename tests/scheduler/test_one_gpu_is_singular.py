"""A count of one takes the singular: "1 h100 GPU of quota left", not "1 h100 GPUs". Every
sentence of ``scheduler.explain`` that counts GPUs (or a capacity unit) agrees with its
number; 0, 2 and a missing count (``?``) keep the plural."""

from __future__ import annotations

import pytest

from gpupool.scheduler.explain import Verdict, explanation
from gpupool.scheduler.types import PendingReason

QUOTA_ROOM = {"queue": "team-a", "flavor": "h100", "resource": "quota", "asked": 4}
SCALED = {
    "queue": "team-a",
    "flavor": "h100",
    "guarantee_gpus": 1.0,
    "scaled_gpus": 0.5,
    "backed_by": None,
    "backing_gpus": 1.0,
    "guaranteed_gpus": 2.0,
}


def detail(reason: PendingReason, facts: dict[str, object]) -> str:
    return explanation("w", Verdict(reason, facts), 1).detail


@pytest.mark.parametrize(
    ("reason", "facts", "said"),
    [
        ("behind", {**QUOTA_ROOM, "free": 1}, ": 1 h100 GPU of quota left, 4 asked;"),
        ("behind", {**QUOTA_ROOM, "free": 2}, ": 2 h100 GPUs of quota left, 4 asked;"),
        ("behind", {**QUOTA_ROOM, "free": 0}, ": 0 h100 GPUs of quota left, 4 asked;"),
        ("behind", {**QUOTA_ROOM}, ": ? h100 GPUs of quota left, 4 asked;"),
        (
            "quota",
            {"queue": "q", "flavor": "h100", "asked_gpus": 4.0, "available_gpus": 1.0},
            "Queue q has 1 h100 GPU of quota available, 4 asked;",
        ),
        (
            "quota",
            {
                "queue": "q",
                "flavor": "h100",
                "asked_gpus": 1.0,
                "available_gpus": 0.0,
                "never_fits": True,
            },
            "Queue q can never hold 1 h100 GPU: the capabilities on its path allow 0.",
        ),
        (
            "capacity",
            {"flavor": "h100", "resource": "gpu", "free": 1.0, "asked": 2},
            "The pool has 1 healthy free h100 GPU, 2 asked.",
        ),
        (
            "capacity",
            {"flavor": "h100", "resource": "cpu", "free": 1.0, "asked": 2},
            "The pool has 1 healthy free CPU core on h100 nodes, 2 asked.",
        ),
        (
            "capacity",
            {"flavor": "h100", "resource": "gpu", "healthy": 1.0, "asked": 2, "never_fits": True},
            "The pool has only 1 healthy h100 GPU; 2 asked.",
        ),
        (
            "capacity",
            {"flavor": "h100", "allowed_nodes": 1, "allowed_gpus": 1.0, "asked": 2},
            "tolerations allow has 1 healthy GPU; it asks 2.",
        ),
        (
            "capacity",
            {"flavor": "gb200", "largest_domain_gpus": 1.0, "asked": 2},
            "the largest gb200 domain has 1 healthy GPU; it asks 2.",
        ),
        (
            "capacity",
            {"flavor": "h100", "asked_pod_gpus": 1.0, "largest_pod_gpus": 0.0},
            "no node has 1 healthy h100 GPU for one pod; the largest has 0.",
        ),
        (
            "quota",
            {
                "queue": "q",
                "flavor": "h100",
                "asked_gpus": 4.0,
                "available_gpus": 0.0,
                "scaled_guarantee": SCALED,
            },
            "Queue team-a's guarantee of 1 h100 GPU is scaled down to 0.5 while the pool's "
            "1 healthy h100 GPU cannot back the 2 guaranteed.",
        ),
        (
            "quota",
            {
                "queue": "q",
                "flavor": "h100",
                "asked_gpus": 4.0,
                "available_gpus": 0.0,
                "scaled_guarantee": {**SCALED, "backed_by": "org"},
            },
            "while the 1 h100 GPU guaranteed to org cannot back the 2 guaranteed under it.",
        ),
        (
            "behind",
            {**QUOTA_ROOM, "free": 0, "lent_gpus": 1.0, "cannot_reclaim": "never"},
            "Its queue lent 1 GPU of its share that cannot be taken back now",
        ),
    ],
)
def test_a_count_of_one_takes_the_singular(
    reason: PendingReason, facts: dict[str, object], said: str
) -> None:
    assert said in detail(reason, facts)
