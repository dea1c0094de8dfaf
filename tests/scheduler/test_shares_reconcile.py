"""Borrowed and lent reconcile at every level of the queue tree, and each borrower's lenders
are queues of its own part of the tree, nearest first (the Queues page's walk-through: search
and nlp both named vision and ads as lenders, 50 GPUs borrowed against 22 lent, and nlp and
vision, lending through their org, showed "Lent 0")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.scheduler.quota import QuotaTree
from gpupool.scheduler.shares import POOL, cohorts_of, queue_shares, reconcile
from gpupool.scheduler.types import MILLI, QueueInfo, QuotaInfo


def q(
    name: str,
    parent: str | None = "root",
    quota: tuple[float, float, float] | None = None,
    lending_limit: float | None = None,
) -> QueueInfo:
    quotas = {} if quota is None else {"h100": QuotaInfo(*(round(x * MILLI) for x in quota))}
    limit = None if lending_limit is None else round(lending_limit * MILLI)
    return QueueInfo(name, parent, quota=quotas, lending_limit=limit)


# The walk-through's tree (h100): two orgs of three teams, the guarantees as configured.
WALK = (
    q("root", None),
    q("product", quota=(100, 158, 318)),
    q("research", quota=(100, 160, 318)),
    q("ads", "product", quota=(32, 53, 160)),
    q("recsys", "product", quota=(32, 52, 160)),
    q("search", "product", quota=(32, 53, 160)),
    q("nlp", "research", quota=(36, 53, 160)),
    q("speech", "research", quota=(32, 54, 160)),
    q("vision", "research", quota=(32, 53, 160)),
)


def tree_of(queues: tuple[QueueInfo, ...], pool: float, used: dict[str, float]) -> QuotaTree:
    tree = QuotaTree(queues, {"h100": round(pool * MILLI)})
    for leaf, gpus in used.items():
        tree.add(leaf, "h100", round(gpus * MILLI))
    return tree


def holder_of(tree: QuotaTree, name: str) -> str:
    """The nearest ancestor with an h100 quota (POOL: none)."""
    return next((a for a in tree.path[name][1:] if tree.quota(a, "h100")), POOL)


def gpus(milli: int) -> float:
    return milli / MILLI


def test_two_borrowers_in_two_orgs_are_lent_what_they_borrow_nearest_first() -> None:
    """nlp borrows 14 inside research (vision, speech idle), search 36 inside product and
    beyond it: each names only its own sisters, then the other org through its own; what
    the borrowers borrow is what is lent."""
    used = {"ads": 45, "recsys": 52, "search": 89, "nlp": 67, "speech": 40, "vision": 20}
    tree = tree_of(WALK, 316, used)
    found = {name: by_flavor["h100"] for name, by_flavor in queue_shares(tree).items()}
    # product uses 186 of 158: ads's idle 8 and 28 from research; research uses 127 of 160.
    assert gpus(found["search"].borrowed) == 36 and gpus(found["nlp"].borrowed) == 14
    assert gpus(found["product"].borrowed) == 28 and gpus(found["research"].lent) == 28
    search = [(s.queue, gpus(s.amount)) for s in found["search"].lenders]
    assert search == [("ads", 8), ("research", 28)]
    nlp = [(s.queue, gpus(s.amount)) for s in found["nlp"].lenders]
    assert {name for name, _ in nlp} == {"vision", "speech"}  # never ads: another org's team
    assert sum(amount for _, amount in nlp) == 14
    # research's 28 lent to product and its 14 lent to nlp are its idle teams' shares
    assert gpus(found["vision"].lent + found["speech"].lent) == 14 + 28
    assert gpus(found["ads"].lent) == 8
    leaves = ("ads", "recsys", "search", "nlp", "speech", "vision")
    assert sum(found[n].borrowed for n in leaves) == sum(found[n].lent for n in leaves)


def test_the_teams_of_an_org_that_lends_show_what_they_lend() -> None:
    """nlp and vision held 2 and 10 of their 53 while research lent to product: their idle
    shares are what research lends, so they are not 'Lent 0'."""
    used = {"ads": 53, "recsys": 52, "search": 120, "nlp": 2, "speech": 54, "vision": 10}
    found = {n: s["h100"] for n, s in queue_shares(tree_of(WALK, 318, used)).items()}
    assert gpus(found["research"].lent) == 67 == gpus(found["product"].borrowed)
    assert found["nlp"].lent > 0 and found["vision"].lent > 0
    assert found["nlp"].lent + found["vision"].lent == found["research"].lent
    assert [s.queue for s in found["search"].lenders] == ["research"]


def test_an_org_lends_its_unassigned_share_before_its_teams_idle_shares() -> None:
    queues = (
        q("root", None),
        q("org1", quota=(0, 10, 20)),
        q("org2", quota=(0, 10, 20)),
        q("a", "org1", quota=(0, 6, 20)),
        q("b", "org2", quota=(0, 10, 20)),
    )
    found = {n: s["h100"] for n, s in queue_shares(tree_of(queues, 20, {"a": 3, "b": 16})).items()}
    # org2 borrows 6 of org1's idle 7: 4 that none of org1's teams deserves, then 2 of a's 3
    assert gpus(found["org1"].lent) == 6 and gpus(found["a"].lent) == 2
    assert [(s.queue, gpus(s.amount)) for s in found["b"].lenders] == [("org1", 6)]


def _random_tree(draw: st.DrawFn) -> tuple[tuple[QueueInfo, ...], float, dict[str, float]]:
    queues = [q("root", None)]
    leaves: list[str] = []

    def level(parent: str, depth: int) -> None:
        for i in range(draw(st.integers(1, 3))):
            name = f"{parent}.{i}" if parent != "root" else f"q{i}"
            inner = depth < 3 and draw(st.booleans())
            has_quota = not inner or draw(st.integers(0, 3)) > 0
            quota = None
            if has_quota:
                deserved = draw(st.integers(0, 12))
                quota = (draw(st.integers(0, deserved)), deserved, deserved + 12)
            limit = draw(st.one_of(st.none(), st.integers(0, 6)))
            queues.append(q(name, parent, quota, limit))
            if inner:
                level(name, depth + 1)
            elif quota is not None:
                leaves.append(name)

    level("root", 1)
    used = {leaf: float(draw(st.integers(0, 20))) for leaf in leaves}
    return tuple(queues), float(draw(st.integers(0, 60))), used


random_trees = st.composite(_random_tree)


@settings(max_examples=300, deadline=None)
@given(random_trees())
def test_borrowed_and_lent_reconcile_at_every_level_of_random_trees(
    case: tuple[tuple[QueueInfo, ...], float, dict[str, float]],
) -> None:
    """At every holder: members' borrowed + shortfall = lent within + unassigned used +
    the holder's borrowed; nobody lends more than its idle share; each borrower's lenders
    add up to what it borrows, are siblings of it or of an ancestor, and what a queue lends
    within its cohort is what the cohort's borrowers get of it."""
    queues, pool, used = case
    tree = tree_of(queues, pool, used)
    shares = queue_shares(tree)
    cohorts = cohorts_of(tree, "h100")
    received: dict[str, int] = {}
    for holder, cohort in cohorts.items():
        left, right = reconcile(cohort)
        assert left == right, holder
        if holder != POOL:
            assert cohort.holder_borrowed == shares[holder]["h100"].borrowed
            assert cohort.lends == shares[holder]["h100"].lent
        for member in cohort.members:
            share = shares[member]["h100"]
            quota = tree.quota(member, "h100")
            assert quota is not None
            assert 0 <= share.lent <= max(0, quota.deserved - share.allocated)
            assert cohort.borrowed.get(member, 0) == share.borrowed
            if not share.borrowed:
                assert share.lenders == ()
                continue
            assert sum(source.amount for source in share.lenders) == share.borrowed
            holders = {holder_of(tree, a) for a in tree.path[member] if tree.quota(a, "h100")}
            for source in share.lenders:
                if source.unassigned or source.queue == POOL:
                    assert source.queue == POOL or source.queue in tree.path[member]
                    continue
                # a sister of the borrower or of one of its ancestors (with a quota)
                assert holder_of(tree, source.queue) in holders, source
                assert source.queue not in tree.path[member]
                if holder_of(tree, source.queue) == holder:
                    received[source.queue] = received.get(source.queue, 0) + source.amount
    borrowers = sum(1 for by in shares.values() if by.get("h100") and by["h100"].borrowed)
    for cohort in cohorts.values():
        for lender, lent in cohort.lent_within.items():
            assert abs(received.get(lender, 0) - lent) <= borrowers, lender
