"""Fair share down the tree: hierarchical Dominant Resource Fairness (issue 13, item 9).

Allocate picks, from the root down, the child with the smallest weighted dominant share (of
its whole subtree's usage) until it reaches a leaf: orgs share the pool by weight, then teams
share their org's part -- as KAI's hierarchical queues divide a parent's fair share among its
children, and Volcano's drf plugin in its hierarchical mode (HDRF) computes DRF level by level
of its queue hierarchy. Flat DRF over the leaves let an org with many teams outweigh an org
with one.
"""

from __future__ import annotations

from typing import Any

import pytest
from scheduler_builders import Case, node, pool, queue, run_case, workload

FULL = list(range(8))


def org(name: str, deserved: float, **extra: Any) -> dict[str, Any]:
    """An inner queue under the root with one h100 quota."""
    return queue(name, deserved=deserved, capability=extra.pop("capability", deserved), **extra)


def ones(team: str, count: int, at: str = "08") -> list[dict[str, Any]]:
    """``count`` pending 1-GPU jobs of a team, submitted a minute apart."""
    return [workload(f"{team}-{i}", team, gpus=1, submitted=f"{at}:{i:02d}") for i in range(count)]


def cpu_tasks(team: str, cpu: int, memory_gb: int) -> list[dict[str, Any]]:
    """Six pending CPU-only tasks of one shape (Ghodsi et al.'s users A and B)."""
    return [
        workload(
            f"{team}-{i}",
            team,
            gpus=0,
            flavor="cpu",
            cpu=cpu,
            memory_gb=memory_gb,
            submitted=f"05:{i:02d}",
        )
        for i in range(1, 7)
    ]


CPU_FLAVORS = [{"name": "cpu", "sharing": "exclusive", "gpu_memory_gb": 0, "hourly_price": 0}]

CASES = [
    Case(
        "orgs share the pool by weight, however many teams each has",
        pool(1),
        [
            org("org-a", 8),
            org("org-b", 8),
            *(queue(f"a{i}", deserved=8, parent="org-a") for i in (1, 2, 3)),
            queue("b1", deserved=8, parent="org-b"),
        ],
        [*ones("a1", 8), *ones("a2", 8), *ones("a3", 8), *ones("b1", 8)],
        want_admitted={"b1-0", "b1-1", "b1-2", "b1-3", "a1-0", "a1-1", "a2-0", "a3-0"},
        want_not_admitted={"b1-4", "a1-2", "a2-1", "a3-1"},
    ),
    Case(
        "a team's idle share goes to its sister team before another org",
        pool(2),
        [
            org("org-a", 8, capability=16),
            org("org-b", 8, capability=16),
            queue("a1", deserved=4, capability=16, parent="org-a"),
            queue("a2", deserved=4, capability=16, parent="org-a"),
            queue("b1", deserved=8, capability=16, parent="org-b", weight=4),
        ],
        [
            workload("a2-run", "a2", gpus=4, on=[("n1", [0, 1, 2, 3])]),
            workload("b1-run", "b1", on=[("n2", FULL)]),
            workload("a2-more", "a2", gpus=4, submitted="09:00"),
            workload("b1-more", "b1", gpus=4, submitted="08:00"),
        ],
        want_admitted={"a2-more"},
        want_not_admitted={"b1-more"},
    ),
    Case(
        "the classic DRF example one level deeper: orgs split 3:2, an org's teams share its part",
        # Ghodsi et al.'s example (scenarios/drf-classic): 9 CPUs and 18 GB, user A's tasks
        # <1 CPU, 4 GB>, user B's <3 CPU, 1 GB>: A runs 3 tasks, B 2. Here A is an org of
        # two teams with A's tasks: the orgs still split 3:2, and org-a's three tasks are
        # shared by its teams 2:1 (ties by name). Flat DRF gave the two teams 4 and B 1.
        [node("c1", gpus=0, flavor="cpu", cpu=9, memory_gb=18)],
        [
            {"name": "org-a", "parent": "root", "tenant": "org-a"},
            {"name": "org-b", "parent": "root", "tenant": "org-b"},
            {"name": "team-a1", "parent": "org-a", "tenant": "team-a1"},
            {"name": "team-a2", "parent": "org-a", "tenant": "team-a2"},
            {"name": "team-b", "parent": "org-b", "tenant": "team-b"},
        ],
        [*cpu_tasks("team-a1", 1, 4), *cpu_tasks("team-a2", 1, 4), *cpu_tasks("team-b", 3, 1)],
        want_admitted={"team-a1-1", "team-a1-2", "team-a2-1", "team-b-1", "team-b-2"},
        want_not_admitted={"team-a1-3", "team-a2-2", "team-b-3"},
        flavors=CPU_FLAVORS,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fair_share_is_computed_level_by_level(case: Case) -> None:
    """The admissions follow DRF at each level of the queue tree."""
    run_case(case)
