"""The Queues page's plain words name each borrower's lenders from its own part of the queue
tree, nearest first, with what each lends to it (the walk-through: nlp, under research, was
told it borrowed from ads, under product, and two borrowers were each told the same lenders'
whole lending)."""

from __future__ import annotations

from decimal import Decimal

from gpupool.dashboard.fairness import Lender, Standing, explain_fairness
from gpupool.scheduler.quota import QuotaTree
from gpupool.scheduler.shares import queue_shares
from gpupool.scheduler.types import MILLI, QueueInfo, QuotaInfo


def q(name: str, parent: str | None, quota: tuple[int, int, int] | None) -> QueueInfo:
    quotas = {} if quota is None else {"h100": QuotaInfo(*(x * MILLI for x in quota))}
    return QueueInfo(name, parent, quota=quotas)


TREE = (
    q("root", None, None),
    q("product", "root", (100, 158, 318)),
    q("research", "root", (100, 160, 318)),
    q("ads", "product", (32, 53, 160)),
    q("recsys", "product", (32, 52, 160)),
    q("search", "product", (32, 53, 160)),
    q("nlp", "research", (36, 53, 160)),
    q("speech", "research", (32, 54, 160)),
    q("vision", "research", (32, 53, 160)),
)
TEAMS = ("ads", "recsys", "search", "nlp", "speech", "vision")


def standings(used: dict[str, int]) -> list[Standing]:
    """The teams' standings as the Queues view builds them from the core's figures."""
    tree = QuotaTree(TREE, {"h100": 316 * MILLI})
    for leaf, gpus in used.items():
        tree.add(leaf, "h100", gpus * MILLI)
    shares = queue_shares(tree)
    found = []
    for name in TEAMS:
        share = shares[name]["h100"]
        quota = tree.quota(name, "h100")
        assert quota is not None
        found.append(
            Standing(
                name,
                name,
                Decimal(quota.deserved) / MILLI,
                Decimal(share.allocated) / MILLI,
                Decimal(share.borrowed) / MILLI,
                Decimal(share.lent) / MILLI,
                0,
                tuple(
                    Lender(s.queue, Decimal(s.amount) / MILLI, s.unassigned) for s in share.lenders
                ),
            )
        )
    return found


USED = {"ads": 45, "recsys": 52, "search": 89, "nlp": 67, "speech": 40, "vision": 20}


def test_a_borrower_names_only_lenders_of_its_own_part_of_the_tree() -> None:
    verdicts = {v.queue: v.text for v in explain_fairness(standings(USED))}
    nlp = verdicts["nlp"]
    assert nlp.startswith("nlp holds 67 GPUs: 53 GPUs deserved, 14 GPUs borrowed, nearest first,")
    assert "vision (" in nlp and "speech (" in nlp
    assert "ads" not in nlp and "product" not in nlp and "search" not in nlp
    assert verdicts["search"].startswith(
        "search holds 89 GPUs: 53 GPUs deserved, 36 GPUs borrowed, nearest first, "
        "from ads (8 GPUs), research (28 GPUs)."
    )


def test_what_the_borrowers_are_told_adds_up_to_what_they_borrow_and_is_lent() -> None:
    found = standings(USED)
    lent = sum((s.lent for s in found), Decimal(0))
    borrowed = sum((s.borrowed for s in found), Decimal(0))
    assert borrowed == lent == 50
    for standing in found:
        assert sum((source.amount for source in standing.lenders), Decimal(0)) == standing.borrowed


def test_a_borrowers_lenders_come_back_from_the_pages_cache() -> None:
    """The pages keep the core's figures pickled (``control.queries``), the compiled core's
    too: a share with its lenders comes back equal."""
    import pickle

    import gpupool.control.queries  # noqa: F401  (registers how the core's values pickle)
    from gpupool.scheduler.shares import QueueShare, Source

    share = QueueShare(67000, 14000, 0, (Source("vision", 8400), Source("research", 5600, True)))
    assert pickle.loads(pickle.dumps(share)) == share  # noqa: S301 (our own bytes)
