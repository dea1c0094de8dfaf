"""Explanations for the hidden state (issue 13, item 10).

A user must be able to act on the reason: back-off, a hold (for the holder and for those it
keeps off), a budget reserved by other pending work (test_budget_earmarks.py), lent quota that
cannot be taken back and why, a size no node's healthy GPUs can ever hold, and victims on
their way out (how many of which queue; their names only in the facts). Times are POSIX
seconds in the facts (the pages show them in the viewer's zone); the sentence gives them in
UTC as the pages and the CLI write a time, "2026-11-29 10:10 UTC"
(test_sentences_say_times_as_people_read_them.py).
"""

from __future__ import annotations

from scheduler_builders import Case, at, check_invariants, node, pool, queue, run_case, workload

from gpupool.scheduler import plan
from gpupool.scheduler.lifecycle import apply_plan
from gpupool.scheduler.scenario import Scenario, parse_time
from gpupool.scheduler.types import PendingExplanation, Plan

FULL = list(range(8))
HALF_A = [0, 1, 2, 3]
HIGH_BUDGET = [{"tenant": "team-a", "priority_class": "high", "gpu_hours": 100, "used": 0}]


def pending(result: Plan, name: str) -> PendingExplanation:
    """The plan's explanation for one workload."""
    return next(p for p in result.pending if p.workload == name)


def test_a_backed_off_workload_is_told_how_many_preemptions_and_until_when() -> None:
    """urgent caused four preemptions between 09:10 and 09:40: one priority step lower until
    10:10 (30 minutes after the last)."""
    result = run_case(
        Case(
            "back-off explained",
            pool(1),
            [queue("team-a", deserved=8)],
            [
                workload("victim", priority="interactive", on=[("n1", FULL)]),
                workload("urgent", priority="high"),
            ],
            budgets=HIGH_BUDGET,
            history=[
                {"at": at(t), "victim": f"x{i}", "preemptor": "urgent"}
                for i, t in enumerate(["09:10", "09:20", "09:30", "09:40"])
            ],
        )
    )
    urgent = pending(result, "urgent")
    backoff = urgent.facts["backoff"]
    assert backoff == {
        "caused_by": "workload",
        "preemptions": 4,
        "window_s": 3600.0,
        "until": parse_time(at("10:10")),
    }
    assert "caused 4 preemptions in the last 1 h" in urgent.detail
    assert "one priority step lower until 2026-11-29 10:10 UTC." in urgent.detail


def test_a_hold_is_explained_to_its_holder_and_to_the_work_it_keeps_off() -> None:
    """The starving gang is told where capacity is held for it; the job kept off is told for
    whom, and since when that one starves (submitted 06:00, limit one hour)."""
    result = run_case(
        Case(
            "hold explained",
            pool(1),
            [queue("team-a", deserved=16)],
            [
                workload("r1", gpus=4, on=[("n1", HALF_A)]),
                workload("big", submitted="06:00"),
                workload("small", gpus=2, submitted="09:00", protected_s=3600),
            ],
            policy={"placement": "gpupool", "starvation_limit_s": 3600},
        )
    )
    big, small = pending(result, "big"), pending(result, "small")
    assert big.facts["held_nodes"] == ["n1"]
    assert "Capacity is being held for it on n1." in big.detail
    assert small.facts["held_for"] == "big"
    assert small.facts["starving_since"] == parse_time(at("07:00"))
    assert "held for big, which has starved since 2026-11-29 07:00 UTC:" in small.detail


def test_lent_quota_that_cannot_be_taken_back_says_why() -> None:
    """second lent its whole share to first, whose work is protected until 11:00."""
    result = run_case(
        Case(
            "lent quota explained",
            pool(2),
            [
                queue("first", deserved=8, capability=16),
                queue("second", deserved=8, capability=16),
            ],
            [
                workload("f1", "first", on=[("n1", FULL)], started="09:00", protected_s=7200),
                workload("f2", "first", on=[("n2", FULL)], started="09:30", protected_s=7200),
                workload("s1", "second"),
            ],
        )
    )
    s1 = pending(result, "s1")
    assert s1.facts["lent_gpus"] == 8
    assert s1.facts["cannot_reclaim"] == "protected"
    assert s1.facts["reclaimable_at"] == parse_time(at("11:00"))
    assert "lent 8 GPUs of its share" in s1.detail
    assert "protected until 2026-11-29 11:00 UTC." in s1.detail


def test_lent_quota_held_by_a_queue_that_is_not_reclaimable_says_so() -> None:
    """The borrower's queue is not reclaimable: nothing it borrowed comes back by force."""
    result = run_case(
        Case(
            "lent to a non-reclaimable queue",
            pool(2),
            [
                queue("first", deserved=8, capability=16, reclaimable=False),
                queue("second", deserved=8, capability=16),
            ],
            [
                workload("f1", "first", on=[("n1", FULL)]),
                workload("f2", "first", on=[("n2", FULL)]),
                workload("s1", "second"),
            ],
        )
    )
    assert pending(result, "s1").facts["cannot_reclaim"] == "not-reclaimable"


def test_a_pod_no_node_can_ever_hold_is_capacity_with_the_largest_size() -> None:
    """Two healthy GPUs failed on each node: a pod of 8 GPUs fits on none, however free the
    pool is. That is capacity (with the largest pod a node can hold), not fragmentation."""
    result = run_case(
        Case(
            "a pod larger than any node",
            [node("n1", unhealthy=(6, 7)), node("n2", unhealthy=(6, 7))],
            [queue("team-a", deserved=16)],
            [workload("w1"), workload("w2", gpus=16)],
        )
    )
    for name, asked in (("w1", 8), ("w2", 16)):
        explained = pending(result, name)
        assert explained.reason == "capacity", explained
        assert explained.facts["largest_pod_gpus"] == 6
        assert explained.facts["asked_pod_gpus"] == asked
        assert f"no node has {asked} healthy h100 GPUs for one pod" in explained.detail


def test_work_only_cordons_keep_out_waits_in_line_and_is_not_set_aside() -> None:
    """Both nodes are cordoned for maintenance: an 8-GPU pod and a 16-GPU gang fit the pool
    once the cordons end, so they wait (capacity, with a place in line), not "never fits"
    (which sets work aside at enqueue, with no place and no estimate). A pod larger than any
    node even uncordoned, and a gang larger than the whole pool, still never fit."""
    result = run_case(
        Case(
            "cordons are not never",
            [node("n1", cordoned=True), node("n2", cordoned=True)],
            [queue("team-a", deserved=16, capability=64)],
            [
                workload("w1", submitted="09:00"),
                workload("w2", gpus=8, count=2, submitted="09:01"),
                workload("too-big-pod", gpus=16, submitted="09:02"),
                workload("too-big-gang", gpus=8, count=3, submitted="09:03"),
            ],
        )
    )
    for name in ("w1", "w2"):
        explained = pending(result, name)
        assert explained.reason == "capacity", explained
        assert not explained.facts.get("never_fits"), explained
    assert [p.workload for p in result.pending if not p.facts.get("never_fits")] == ["w1", "w2"]
    big_pod = pending(result, "too-big-pod")
    assert big_pod.facts["never_fits"] and big_pod.facts["largest_pod_gpus"] == 8
    big_gang = pending(result, "too-big-gang")
    # The pool's size once the cordons end: why it can never run (not today's 0).
    assert big_gang.facts["never_fits"] and big_gang.facts["healthy"] == 16


def test_work_that_never_fits_is_said_so_before_it_waits_for_its_pods() -> None:
    """A gang of 3 x 8 GPUs in a queue capable of 16, two of its pods not made yet: it can never
    run, and the pods it lacks could only make it larger. Enqueue says never fits first (gpupool
    made the pods of work submitted through it while it read "gang": 100,000 at once for a
    request no capability allowed); a gang that could fit still waits for its pods."""
    result = run_case(
        Case(
            "never fits before gang",
            pool(4),
            [queue("team-a", deserved=8, capability=16)],
            [
                workload("too-big", gpus=8, count=3, missing_pods=2, submitted="09:00"),
                workload("fits", gpus=8, count=2, missing_pods=1, submitted="09:01"),
            ],
        )
    )
    too_big = pending(result, "too-big")
    assert too_big.reason == "quota" and too_big.facts["never_fits"], too_big
    fits = pending(result, "fits")
    assert fits.reason == "gang" and fits.facts == {"missing_pods": 1}


def test_a_preemptor_is_told_how_many_victims_of_which_queue_but_not_their_names() -> None:
    """urgent takes back team-a's share from two borrowers, one each of team-b and team-c.
    The facts name the victims (admins see them); the sentence urgent's owner reads says two
    workloads, one of each queue -- other tenants' workload names are not theirs to see --
    in the cycle that evicts and in the next, while the victims leave."""
    case = Case(
        "a preemptor waits for victims of two other queues",
        pool(1),
        [
            queue("team-a", deserved=8),
            queue("team-b", deserved=0, capability=8),
            queue("team-c", deserved=0, capability=8),
        ],
        [
            workload("b-secret-run", "team-b", gpus=4, on=[("n1", HALF_A)]),
            workload("c-secret-run", "team-c", gpus=4, on=[("n1", [4, 5, 6, 7])]),
            workload("urgent"),
        ],
        want_evicted={"b-secret-run": "reclaim", "c-secret-run": "reclaim"},
        want_reasons={"urgent": "waiting-for-preemption"},
    )
    first = run_case(case)
    loaded = case.load()
    leaving = apply_plan(loaded.snapshot, first, loaded.now, evictions_take_time=True)
    second = plan(leaving, loaded.policy, loaded.now + 60)
    check_invariants(Scenario(leaving, loaded.policy, loaded.now + 60), second)
    for result in (first, second):
        urgent = pending(result, "urgent")
        assert urgent.reason == "waiting-for-preemption"
        assert urgent.facts["victims"] == ["b-secret-run", "c-secret-run"]
        assert urgent.facts["victim_queues"] == {"team-b": 1, "team-c": 1}
        assert "2 workloads (1 of queue team-b, 1 of queue team-c)" in urgent.detail
        assert "secret" not in urgent.detail
    assert pending(second, "urgent").facts["held_nodes"] == ["n1"]
