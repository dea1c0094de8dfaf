"""A gang bound to one NVLink domain (``topology: domain``) that asks more GPUs than the
flavor's largest domain holds can never run: enqueue says so (``never_fits``, no place in
line), as for a pod larger than any node, with the reason DESIGN §3 gives a gang that could
be placed were its domain requirement dropped but that no single NVLink domain holds:
``topology`` (it said ``capacity``, which DESIGN keeps for too few healthy free GPUs in the
pool; the pool's 32 GPUs hold its 24). It waited in line for ever, "no single
NVLink domain holds its pods", with a position and an estimate (a dashboard walk-through:
2 x 8 GPUs on h100 nodes that are each their own domain). A gang that prefers a domain, or one
a domain could hold once cordons end, still waits."""

from __future__ import annotations

from scheduler_builders import Case, node, queue, run_case, workload

from gpupool.scheduler.types import PendingExplanation, Plan


def pending(result: Plan, name: str) -> PendingExplanation:
    return next(p for p in result.pending if p.workload == name)


def test_a_domain_gang_larger_than_any_domain_never_fits() -> None:
    result = run_case(
        Case(
            "domain too small",
            [node("n1"), node("n2"), node("n3", domain="d3"), node("n4", domain="d3")],
            [queue("team-a", deserved=32, capability=64)],
            [
                workload("too-big", gpus=8, count=3, topology="domain", submitted="09:00"),
                workload("fits-d3", gpus=8, count=2, topology="domain", submitted="09:01"),
                workload("spread", gpus=8, count=3, topology="preferred", submitted="09:02"),
            ],
            want_admitted={"fits-d3"},
        )
    )
    too_big = pending(result, "too-big")
    assert too_big.reason == "topology" and too_big.facts["never_fits"], too_big
    assert too_big.facts["largest_domain_gpus"] == 16 and too_big.facts["asked"] == 24
    assert too_big.detail == (
        "It can never run as asked: it must sit in one NVLink domain, and the largest h100 "
        "domain has 16 healthy GPUs; it asks 24."
    )
    assert not any(p.facts.get("never_fits") for p in result.pending if p.workload != "too-big")


def test_a_domain_only_cordons_keep_small_waits_in_line() -> None:
    """d3's two nodes are cordoned: a 2 x 8 domain gang fits it once the cordons end."""
    result = run_case(
        Case(
            "cordoned domain",
            [
                node("n1"),
                node("n3", domain="d3", cordoned=True),
                node("n4", domain="d3", cordoned=True),
            ],
            [queue("team-a", deserved=24, capability=64)],
            [workload("waits", gpus=8, count=2, topology="domain")],
        )
    )
    waits = pending(result, "waits")
    assert not waits.facts.get("never_fits"), waits


def test_no_domain_ever_holding_it_is_topology_and_a_pool_too_small_capacity() -> None:
    """DESIGN §3: ``topology`` is "the gang could be placed if its `domain` requirement were
    dropped, but no single NVLink domain holds it"; ``capacity`` is "not enough healthy free
    GPUs of the flavor in the pool". A 24-GPU domain gang on a 32-GPU pool whose domains hold
    16 each is the first, for ever (``never_fits``); a 40-GPU one is the second: the pool
    itself could never hold it, whatever its domains."""
    nodes = [node("n1", domain="d1"), node("n2", domain="d1"), node("n3"), node("n4")]
    result = run_case(
        Case(
            "never: topology or capacity",
            nodes,
            [queue("team-a", deserved=64, capability=64)],
            [
                workload("three", gpus=8, count=3, topology="domain"),
                workload("five", gpus=8, count=5, topology="domain"),
            ],
            want_reasons={"three": "topology", "five": "capacity"},
        )
    )
    three, five = pending(result, "three"), pending(result, "five")
    assert three.facts["never_fits"] and three.facts["largest_domain_gpus"] == 16
    assert three.detail == (
        "It can never run as asked: it must sit in one NVLink domain, and the largest h100 "
        "domain has 16 healthy GPUs; it asks 24."
    )
    assert five.facts["never_fits"] and "largest_domain_gpus" not in five.facts
    assert five.detail == "The pool has only 32 healthy h100 GPUs; 40 asked."
