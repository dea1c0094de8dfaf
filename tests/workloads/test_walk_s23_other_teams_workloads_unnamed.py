"""Walk s23, as nlp's member: the workload page had stopped naming another team's victims,
but the explanation the API gives (and so ``gpupool why``) still named them, and a sentence
"Capacity is held for vision/big, which has starved since ..." named vision's workload on
the page, in the API and in the CLI. ``workloads.queries`` keeps the one rule
(``facts_seen_by``, ``sentence_seen_by``, beside ``sees_preemptor``): a workload is named
only to admins and its own team; anyone else reads "another team's workload". And a
never-fitting workload's summary said "Never fits: It can never run as asked: ...": the
core's opening words are said once (``never_fits_reason``)."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from domain_builders import explained
from two_teams import (
    LEAVING_FROM_BOTH,
    STARVING_FOR_VISION,
    Pool,
    nlp_and_vision,
    submit,
)

from gpupool.api.access import access_of
from gpupool.inventory.units import FlavorUnits
from gpupool.scheduler.explain import NO_UNITS, Verdict, explanation
from gpupool.workloads.queries import (
    ANOTHER_TEAMS_WORKLOAD,
    AS_WRITTEN,
    NEVER_AS_ASKED,
    NamesSeen,
    explain,
    facts_seen_by,
    sentence,
    summary,
)

GPUS = NO_UNITS  # every flavor here counts GPUs

pytestmark = pytest.mark.django_db

STARVING, LEAVING = STARVING_FOR_VISION, LEAVING_FROM_BOTH


@pytest.fixture
def pool(db: Any) -> Pool:
    """Teams nlp (lead lena, member max) and vision (lead vera), admin ada; one 8-GPU node."""
    return nlp_and_vision()


def seen_by(pool: Pool, name: str) -> NamesSeen:
    return NamesSeen(access_of(pool.users[name]))


def core_words(reason: str, facts: dict[str, Any], position: int = 1) -> str:
    """The sentence the core writes for the verdict (what the cycle stores)."""
    return explanation("", Verdict(reason, facts), position).detail  # type: ignore[arg-type]


def test_facts_leave_out_only_the_workloads_of_other_teams(pool: Pool) -> None:
    budget = {"then": "behind", "then_facts": STARVING, "tenant": "nlp"}
    member = seen_by(pool, "max")
    assert facts_seen_by(LEAVING, member) == {
        "victims": ["nlp/sweep"],
        "victim_queues": {"nlp": 1, "vision": 1},
    }
    assert "held_for" not in facts_seen_by(STARVING, member)
    assert facts_seen_by(STARVING, member)["held_because"] == "starving"
    assert "held_for" not in facts_seen_by(budget, member)["then_facts"]  # type: ignore[operator]
    admin = seen_by(pool, "ada")  # sees every name
    assert facts_seen_by(LEAVING, admin) == LEAVING
    assert facts_seen_by(budget, admin) == budget
    own = {**STARVING, "held_for": "nlp/big"}
    assert facts_seen_by(own, member) == own  # its own team's is named


def test_the_sentence_says_another_teams_workload_not_its_name(pool: Pool) -> None:
    written = core_words("behind", STARVING)
    assert "vision/big" in written  # the core names it; readers render it
    member, admin = seen_by(pool, "max"), seen_by(pool, "ada")
    for position in (1, None):  # rendered again with the position, or as written
        said = sentence("behind", STARVING, position, written, member, units=GPUS, zone=UTC)
        assert "vision/big" not in said
        assert f"Capacity is held for {ANOTHER_TEAMS_WORKLOAD}, which has starved" in said
        assert "vision/big" in sentence(
            "behind", STARVING, position, written, admin, units=GPUS, zone=UTC
        )
    own = {**STARVING, "held_for": "nlp/big"}
    assert "held for nlp/big," in sentence(
        "behind", own, 1, core_words("behind", own), member, units=GPUS, zone=UTC
    )
    # a budget demotion that then waits behind it says the same
    budget = {
        "tenant": "nlp",
        "priority_class": "high",
        "remaining_gpu_hours": 0,
        "reservation_gpu_hours": 8,
        "then": "behind",
        "then_facts": STARVING,
    }
    said = sentence("budget", budget, 1, core_words("budget", budget), member, units=GPUS, zone=UTC)
    assert "vision/big" not in said and ANOTHER_TEAMS_WORKLOAD in said


def test_explain_and_summary_name_it_only_to_who_may_see_it(pool: Pool) -> None:
    waiting = submit(pool, "waiting", pool.nlp_queue, "max")
    explained(waiting, "behind", core_words("behind", STARVING), STARVING, queue_rank=1.0)
    for_max = explain(waiting, seen=seen_by(pool, "max"), units=FlavorUnits())
    assert "vision/big" not in for_max.detail + for_max.summary
    assert ANOTHER_TEAMS_WORKLOAD in for_max.summary
    assert "held_for" not in for_max.facts
    for_ada = explain(waiting, seen=seen_by(pool, "ada"), units=FlavorUnits())
    assert for_ada.facts["held_for"] == "vision/big" and "vision/big" in for_ada.summary


def test_a_never_fitting_summary_says_never_fits_once(pool: Pool) -> None:
    facts = {"flavor": "h100", "allowed_nodes": 0, "asked": 8, "never_fits": True}
    written = core_words("capacity", facts)
    assert written.startswith(NEVER_AS_ASKED)  # the core's own opening
    huge = submit(pool, "huge", pool.nlp_queue, "max")
    explained(huge, "capacity", written, facts)
    said = summary(huge, seen=AS_WRITTEN, units=FlavorUnits())
    assert said.startswith("Never fits: no h100 node matches its node selector"), said
    assert "It can never run as asked" not in said


def test_my_workloads_unnames_them_in_one_query_for_the_page(pool: Pool) -> None:
    """The list's sentences: another team's workload unnamed in every row, for one query of
    the reader's namespaces, however many rows name one."""
    client = Client()
    client.force_login(pool.users["max"])
    counts = []
    for index in range(3):
        waiting = submit(pool, f"waiting-{index}", pool.nlp_queue, "max")
        explained(waiting, "behind", core_words("behind", STARVING), STARVING, float(index + 1))
        with CaptureQueriesContext(connection) as queries:
            page = client.get("/workloads/").content.decode()
        counts.append(len(queries))
        assert "vision/big" not in page
        assert page.count("another team&#x27;s workload") == index + 1
    assert counts[0] == counts[1] == counts[2], counts
