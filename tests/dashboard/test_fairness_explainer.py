"""The Queues page's fairness explainer: each team queue's standing in plain words with its
numbers, who borrows from whom, and who is starved."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from dashboard_pages import live, text

from gpupool.dashboard.fairness import Lender, Standing, explain_fairness
from gpupool.workloads.actions import PodSetSpec, do_submit_workload


def standing(
    queue: str,
    deserved: int,
    allocated: int,
    borrowed: int = 0,
    lent: int = 0,
    waiting: int = 0,
    lenders: tuple[tuple[str, int], ...] = (),
) -> Standing:
    """A team queue's standing in whole GPUs (``lenders``: its sources, nearest first)."""
    return Standing(
        queue,
        queue,
        Decimal(deserved),
        Decimal(allocated),
        Decimal(borrowed),
        Decimal(lent),
        waiting,
        tuple(Lender(name, Decimal(amount)) for name, amount in lenders),
    )


def test_a_borrower_is_told_how_much_it_deserves_and_from_whom_it_borrows() -> None:
    verdicts = explain_fairness(
        [
            standing("team-b", 12, 18, borrowed=6, lenders=(("team-c", 6),)),
            standing("team-c", 6, 0, lent=6),
        ]
    )
    assert verdicts[0].kind == "borrowing"
    assert verdicts[0].text.startswith(
        "team-b holds 18 GPUs: 12 GPUs deserved, 6 GPUs borrowed from team-c, which is idle."
    )
    assert verdicts[1].kind == "lending" and "lends 6 GPUs" in verdicts[1].text


def test_several_lenders_are_named_with_what_each_lends() -> None:
    verdicts = explain_fairness(
        [
            standing("a", 4, 10, borrowed=6, lenders=(("b", 4), ("c", 2))),
            standing("b", 4, 0, lent=4),
            standing("c", 4, 2, lent=2),
        ]
    )
    assert "6 GPUs borrowed, nearest first, from b (4 GPUs), c (2 GPUs)." in verdicts[0].text


def test_a_queue_below_its_share_with_work_waiting_is_starved() -> None:
    [verdict] = explain_fairness([standing("nlp", 8, 2, waiting=3)])
    assert verdict.kind == "starved"
    assert verdict.text == (
        "nlp holds 2 GPUs of the 8 GPUs it deserves while 3 of its workloads wait: it is "
        "starved, and nobody borrows from it now, so its work goes first as GPUs free up."
    )


def test_a_queue_below_its_share_is_not_starved_while_gpus_of_its_flavor_are_free() -> None:
    """Its work waits for room that fits it or for its own limits: the fair share is not
    what holds it back, and the verdict says so (with a whole GPU free; less is full)."""
    [verdict] = explain_fairness([standing("nlp", 8, 2, waiting=3)], free=Decimal(40))
    assert verdict.kind == "waiting"
    assert verdict.text == (
        "nlp holds 2 GPUs of the 8 GPUs it deserves while 3 of its workloads wait, though "
        "40 GPUs of this flavor are free: its work waits for room that fits it (whole nodes, "
        "an NVLink domain, a gang placed at once) or for its own limits, not for its share. "
        "Each workload's reason says which."
    )
    [full] = explain_fairness([standing("nlp", 8, 2, waiting=3)], free=Decimal("0.5"))
    assert full.kind == "starved"
    waiting, borrowing = explain_fairness(
        [standing("nlp", 8, 2, waiting=1), standing("cv", 4, 10, borrowed=6)], free=Decimal(8)
    )[::-1]
    assert (borrowing.kind, waiting.kind) == ("borrowing", "waiting")


def test_a_starved_queue_is_told_of_reclaim_only_when_another_borrows() -> None:
    starved, _ = sorted(
        explain_fairness([standing("nlp", 8, 2, waiting=1), standing("cv", 4, 10, borrowed=6)]),
        key=lambda verdict: verdict.queue != "nlp",
    )
    assert starved.kind == "starved"
    assert "while 1 of its workloads waits: it is starved, and the scheduler reclaims" in (
        starved.text
    )


def test_the_queues_page_explains_each_team_in_words(pool: Any, page_as: Any) -> None:
    part = text(live(page_as("vic"), "/queues/"))
    assert "Who holds what, in plain words (h100)" in part
    assert "nlp holds 0 GPUs, within the" in part


def test_the_queues_page_does_not_call_a_queue_starved_while_its_flavor_has_free_gpus(
    pool: Any, page_as: Any
) -> None:
    """nlp waits with 0 of its 8 deserved GPUs while none of the 15 healthy ones is held: a
    16-GPU gang cannot fit in nodes of 8, whatever the shares say."""
    do_submit_workload(
        "wide", queue=pool.nlp_queue, pod_sets=[PodSetSpec(count=2, gpus=8, flavor=pool.h100)]
    )
    part = text(live(page_as("ada"), "/queues/"))
    assert "waits for room" in part
    assert (
        "nlp holds 0 GPUs of the 8 GPUs it deserves while 1 of its workloads waits, though "
        "15 GPUs of this flavor are free" in part
    )
    assert "it is starved" not in part


def test_a_borrower_names_the_three_largest_lenders_and_counts_the_rest() -> None:
    lenders = [standing(f"l{i}", 8, 8 - i, lent=i) for i in range(1, 7)]  # lend 1..6
    sources = tuple((f"l{i}", i) for i in range(6, 0, -1))
    verdicts = explain_fairness([standing("a", 4, 25, borrowed=21, lenders=sources), *lenders])
    assert verdicts[0].kind == "borrowing"
    assert (
        "from l6 (6 GPUs), l5 (5 GPUs), l4 (4 GPUs) and 3 other sources (6 GPUs in all)."
        in verdicts[0].text
    )


def test_what_others_use_beyond_what_a_queue_lends_is_said_apart() -> None:
    """A walk-through read "ads holds 18 of the 53 it deserves and lends 35 GPUs" beside ads's
    lending limit of 8 and "Guarantee is never lent": the figures count, where they are used,
    GPUs the queue does not lend (its guarantee, what is past its lending limit); the
    sentence says what it lends and the rest apart."""
    ads = Standing(
        "ads", "ads", Decimal(53), Decimal(18), Decimal(0), Decimal(35), 0,
        guarantee=Decimal(32), lending_limit=Decimal(8),
    )  # fmt: skip
    assert ads.may_lend == 8  # idle beyond its guarantee (53 - 32 = 21), at most its limit
    (verdict,) = explain_fairness([ads])
    assert verdict.kind == "lending"
    assert verdict.text == (
        "ads holds 18 GPUs of the 53 GPUs it deserves and lends 8 GPUs to busier teams while it "
        "does not need them; 27 GPUs more of its idle share (its guarantee of 32 GPUs or what "
        "is past its lending limit of 8 GPUs, which it does not lend) are in use by others "
        "until it wants them back."
    )
    free = Standing("free", "free", Decimal(16), Decimal(4), Decimal(0), Decimal(6), 0)
    assert explain_fairness([free])[0].text == (
        "free holds 4 GPUs of the 16 GPUs it deserves and lends 6 GPUs to busier teams while "
        "it does not need them."
    )
