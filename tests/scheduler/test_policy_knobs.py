"""Policy knobs that express the B3 baselines through the same core.

``policy.queueing``: "best-effort" (default: no head-of-line blocking) or
"fifo" (strict order inside a queue: nothing behind a blocked head is admitted, like Kueue's
StrictFIFO). ``policy.queue_order``: "dominant-share" (default; DRF across queues) or
"head-rank" (the queues' heads by rank: within deserved before borrowing, then priority, then
submit time, as Kueue orders ClusterQueue heads when fair sharing is off).
``policy.fair_reclaim``: true (default) or false (fair-share reclaim, tested with the reclaim
rules). A scenario's ``fair_sharing``, the older switch, sets both. ``policy.victim_search``:
"fewest" (default) or "greedy" (Kueue's one-pass search, recency by start time).
"""

from __future__ import annotations

from typing import Any

import pytest
from scheduler_builders import Case, at, pool, queue, run_case, scenario, workload

from gpupool.scheduler import plan
from gpupool.scheduler.scenario import ScenarioError, policy_from_dict, scenario_from_dict
from gpupool.scheduler.types import PolicyInfo

HALF_A = [0, 1, 2, 3]
FULL = list(range(8))
FIFO = {"placement": "gpupool", "queueing": "fifo"}
NO_FAIR_SHARING = {"placement": "gpupool", "fair_sharing": False}
HEAD_RANK = {"placement": "gpupool", "queue_order": "head-rank"}


def blocked_head_case(name: str, policy: dict[str, Any] | None, **want: Any) -> Case:
    """A queue whose oldest job (8 GPUs) cannot fit, with a small job behind it that could."""
    return Case(
        name,
        pool(2),
        [queue("team-a", deserved=8, capability=8), queue("team-b", deserved=8)],
        [
            workload("a-run", gpus=4, on=[("n1", HALF_A)]),
            workload("a-head", gpus=8, submitted="08:00"),
            workload("a-small", gpus=2, submitted="09:00"),
            workload("b1", "team-b", gpus=2, submitted="09:30"),
        ],
        policy=policy,
        **want,
    )


CROSS_QUEUE = (
    pool(3),
    [queue("team-a", deserved=20, capability=24), queue("team-b", deserved=8)],
    [
        workload("a-run", on=[("n1", FULL)]),
        workload("a-run2", gpus=4, on=[("n2", HALF_A)]),
        workload("a1", submitted="07:00"),
        workload("b1", "team-b", submitted="09:00"),
    ],
)


def entitlement_case(name: str, weights: tuple[float, float], **want: Any) -> Case:
    """One idle node, an 8-GPU job in each queue; team-a uses more GPUs but less of its share.

    team-a: deserved 16, 8 running (half its share); team-b: deserved 4, 4 running (all of it),
    not reclaimable, so only allocate's queue order decides.
    """
    return Case(
        name,
        pool(3),
        [
            queue("team-a", deserved=16, capability=24, weight=weights[0]),
            queue("team-b", deserved=4, capability=16, weight=weights[1], reclaimable=False),
        ],
        [
            workload("a-run", on=[("n1", FULL)]),
            workload("b-run", "team-b", gpus=4, on=[("n2", HALF_A)]),
            workload("a1", submitted="09:00"),
            workload("b1", "team-b", submitted="09:00"),
        ],
        **want,
    )


CASES = [
    entitlement_case(
        # DRF alone would serve team-b (fewer GPUs); within-deserved work goes first (5a)
        "work within its deserved share goes before borrowing work whatever the weights",
        (1, 1),
        want_admitted={"a1"},
        want_not_admitted={"b1"},
    ),
    entitlement_case(
        "weights proportional to deserved make DRF serve the queue furthest below its share",
        (16, 4),
        want_admitted={"a1"},
        want_not_admitted={"b1"},
    ),
    blocked_head_case(
        "best-effort queueing admits smaller work behind a blocked head",
        None,
        want_admitted={"a-small", "b1"},
        want_reasons={"a-head": "quota"},
    ),
    blocked_head_case(
        "strict fifo admits nothing behind a head that cannot be admitted",
        FIFO,
        want_admitted={"b1"},
        want_not_admitted={"a-head", "a-small"},
        want_reasons={"a-head": "quota", "a-small": "behind"},
    ),
    Case(
        "fair sharing serves the queue with the smaller dominant share first",
        *CROSS_QUEUE,
        want_admitted={"b1"},
        want_not_admitted={"a1"},
    ),
    Case(
        "without fair sharing the earliest submitted head goes first",
        *CROSS_QUEUE,
        policy=NO_FAIR_SHARING,
        want_admitted={"a1"},
        want_not_admitted={"b1"},
        want_reasons={"b1": "behind"},
    ),
    Case(
        "the head-rank queue order alone serves the earliest submitted head first",
        *CROSS_QUEUE,
        policy=HEAD_RANK,
        want_admitted={"a1"},
        want_not_admitted={"b1"},
        want_reasons={"b1": "behind"},
    ),
    Case(
        "without fair reclaim the queues are still served by dominant share",
        *CROSS_QUEUE,
        policy={"placement": "gpupool", "fair_reclaim": False},
        want_admitted={"b1"},
        want_not_admitted={"a1"},
    ),
    Case(
        "without fair sharing work within its deserved share goes before borrowing work",
        pool(2),
        [queue("team-a", deserved=4, capability=16), queue("team-b", deserved=8)],
        [
            workload("a-run", on=[("n1", FULL)]),
            workload("a1", submitted="07:00"),
            workload("b1", "team-b", submitted="09:00"),
        ],
        policy=NO_FAIR_SHARING,
        want_admitted={"b1"},
        want_not_admitted={"a1"},
    ),
    Case(
        "without fair sharing higher priority goes before earlier submission",
        *CROSS_QUEUE[:2],
        [
            *CROSS_QUEUE[2][:3],
            workload("b1", "team-b", submitted="09:00", priority="interactive"),
        ],
        policy=NO_FAIR_SHARING,
        want_admitted={"b1"},
        want_not_admitted={"a1"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_policy_knob_changes_the_plan_as_its_case_says(case: Case) -> None:
    """The plan shows what the knob says, and keeps every invariant."""
    run_case(case)


def test_strict_fifo_names_the_head_that_blocks_the_queue() -> None:
    """The explanation of work behind a blocked head names that head and the position."""
    case = blocked_head_case("explained", FIFO)
    loaded = case.load()
    pending = {p.workload: p for p in plan(loaded.snapshot, loaded.policy, loaded.now).pending}
    assert pending["a-small"].detail == (
        "Queue team-a is served in strict FIFO order and a-head, ahead of it, cannot be "
        "admitted yet: position 2."
    )
    assert pending["a-small"].facts["blocked_by"] == "a-head"


@pytest.mark.parametrize(
    ("queueing", "evicted"),
    [("best-effort", ["low-run"]), ("fifo", [])],
    ids=["best-effort", "fifo"],
)
def test_only_the_head_of_a_strict_fifo_queue_may_preempt(
    queueing: str, evicted: list[str]
) -> None:
    """The head cannot make room by preemption; the job behind it could, but under strict
    FIFO it waits its turn instead of evicting."""
    loaded = scenario_from_dict(
        scenario(
            pool(1),
            [queue("team-a", deserved=8)],
            [
                workload("low-run", gpus=4, priority="low", on=[("n1", HALF_A)]),
                workload("normal-run", gpus=4, on=[("n1", [4, 5, 6, 7])]),
                workload("head", gpus=8, submitted="08:00"),
                workload("second", gpus=4, submitted="09:00"),
            ],
            policy={"queueing": queueing, "preemption_attempts_per_queue": 2},
        )
    )
    result = plan(loaded.snapshot, loaded.policy, loaded.now)
    assert [e.workload for e in result.evict] == evicted


GREEDY = {"placement": "gpupool", "victim_search": "greedy"}
HIGH_BUDGET = [{"tenant": "team-a", "priority_class": "high", "gpu_hours": 100, "used": 0}]


def lone_victim_case(name: str, policy: dict[str, Any] | None, evicted: str) -> Case:
    """Two victims each enough alone: a small one, started early and checkpointed just now,
    and a whole-node one started last. "fewest" takes the small one (smallest lone victim;
    it would also lose the least); "greedy", Kueue's, the most recently started."""
    return Case(
        name,
        pool(2),
        [queue("team-a", deserved=16)],
        [
            workload("kept", gpus=6, on=[("n1", [2, 3, 4, 5, 6, 7])], protected_s=86400),
            workload(
                "small",
                gpus=2,
                on=[("n1", [0, 1])],
                started="06:00",
                last_checkpoint_at=at("09:55"),
            ),
            workload("big", on=[("n2", FULL)], started="09:30"),
            workload("urgent", gpus=2, priority="high"),
        ],
        policy=policy,
        budgets=HIGH_BUDGET,
        want_evicted={evicted: "preempt"},
    )


@pytest.mark.parametrize(
    "case",
    [
        lone_victim_case("fewest (default) evicts the smallest lone victim", None, "small"),
        lone_victim_case("greedy evicts the most recently started, as Kueue", GREEDY, "big"),
    ],
    ids=lambda c: c.name,
)
def test_the_victim_search_picks_the_victim_its_case_names(case: Case) -> None:
    """``policy.victim_search`` picks the victim search; the B3 kueue-like baseline is greedy."""
    run_case(case)


BAD = [
    ({"queueing": "lifo"}, "policy.queueing: must be 'best-effort' or 'fifo'"),
    ({"fair_sharing": "no"}, "policy.fair_sharing: must be true or false"),
    ({"queue_order": "fifo"}, "policy.queue_order: must be 'dominant-share' or 'head-rank'"),
    ({"fair_reclaim": "yes"}, "policy.fair_reclaim: must be true or false"),
    ({"victim_search": "lifo"}, "policy.victim_search: must be 'fewest' or 'greedy'"),
]


@pytest.mark.parametrize(("policy", "message"), BAD, ids=[m for _, m in BAD])
def test_an_unknown_policy_value_is_refused_naming_the_field(
    policy: dict[str, Any], message: str
) -> None:
    """The new keys are as strict as the rest of the format."""
    with pytest.raises(ScenarioError) as raised:
        scenario_from_dict(scenario(pool(1), [queue("team-a")], [], policy=policy))
    assert str(raised.value) == message


LEGACY = [
    ("fair sharing on is the default", {"fair_sharing": True}, PolicyInfo()),
    (
        "fair sharing off is head-rank without fair reclaim",
        {"fair_sharing": False},
        PolicyInfo(queue_order="head-rank", fair_reclaim=False),
    ),
    (
        "fair reclaim named beside fair sharing off wins",
        {"fair_sharing": False, "fair_reclaim": True},
        PolicyInfo(queue_order="head-rank"),
    ),
    (
        "a queue order named beside fair sharing on wins",
        {"fair_sharing": True, "queue_order": "head-rank"},
        PolicyInfo(queue_order="head-rank"),
    ),
    (
        "fair reclaim alone leaves the queue order",
        {"fair_reclaim": False},
        PolicyInfo(fair_reclaim=False),
    ),
]


@pytest.mark.parametrize(("name", "policy", "expected"), LEGACY, ids=[n for n, _, _ in LEGACY])
def test_the_older_fair_sharing_switch_sets_both_strategies_unless_they_are_named(
    name: str, policy: dict[str, Any], expected: PolicyInfo
) -> None:
    """``fair_sharing`` still reads as it always did; ``queue_order``/``fair_reclaim`` win."""
    assert policy_from_dict(policy) == expected
