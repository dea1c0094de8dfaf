"""A workload whose eviction a PodDisruptionBudget refused, as the control loop records it
(``do_record_apply_outcome``): its page and the workloads API say so, naming the budget, while
it runs; the preemptor it was evicted for only to those who may see a preemptor (admins and
the preemptor's own tenant), as a preemption's row does."""

from __future__ import annotations

from typing import Any

from dashboard_pages import text
from django.utils import timezone
from two_teams import submit

from gpupool.control.actions import do_record_apply_outcome
from gpupool.workloads.models import Workload


def refused_for_preemption(pool: Any) -> Workload:
    """``vision/sweep`` running, its eviction for ``nlp/secret-run`` refused by
    ``vision/guard``."""
    victim = submit(pool, "sweep", pool.vision_queue, "vic")
    preemptor = submit(pool, "secret-run", pool.nlp_queue, "max")
    Workload.objects.filter(pk=victim.pk).update(
        state="running", evicting_for=preemptor, eviction_reason="preempt"
    )
    at = timezone.now()
    do_record_apply_outcome(
        at=at,
        bind_failed={},
        refused={victim.pk: "eviction refused by a disruption budget: ..."},
        refusals={
            victim.pk: {
                "at": at.isoformat(),
                "budget": "vision/guard",
                "needs": "2 healthy pods and has 2 currently",
                "reason": "preempt",
                "nodes": ["n2"],
                "detail": "Eviction (a preemption) refused by PodDisruptionBudget vision/guard",
            }
        },
    )
    victim.refresh_from_db()
    assert victim.eviction_reason == "" and victim.evicting_for_id is None
    return victim


def test_the_page_names_the_budget_and_the_preemptor_only_to_who_may_see_it(
    pool: Any, page_as: Any
) -> None:
    refused_for_preemption(pool)
    own = text(page_as("vic").get("/workloads/vision/sweep/"))
    assert "data-eviction-refused" in own
    assert "PodDisruptionBudget <code>vision/guard</code>" in own
    assert "it needs 2 healthy pods and has 2 currently" in own
    assert "secret-run" not in own
    admin = text(page_as("ada").get("/workloads/vision/sweep/"))
    assert "its eviction for <code>nlp/secret-run</code> (preempt)" in admin


def test_the_api_names_the_budget_and_the_preemptor_only_to_who_may_see_it(
    pool: Any, page_as: Any
) -> None:
    refused_for_preemption(pool)
    own = page_as("vic").get("/api/v1/workloads/vision/sweep/").json()["eviction_refusal"]
    assert (own["budget"], own["reason"], own["nodes"], own["preemptor"]) == (
        "vision/guard",
        "preempt",
        ["n2"],
        None,
    )
    admin = page_as("ada").get("/api/v1/workloads/vision/sweep/").json()["eviction_refusal"]
    assert admin["preemptor"] == "nlp/secret-run"


def test_a_refusal_kept_on_work_no_longer_running_is_not_shown(pool: Any, page_as: Any) -> None:
    victim = refused_for_preemption(pool)
    Workload.objects.filter(pk=victim.pk).update(state="pending")  # evicted meanwhile
    assert "data-eviction-refused" not in text(page_as("vic").get("/workloads/vision/sweep/"))
    body = page_as("vic").get("/api/v1/workloads/vision/sweep/").json()
    assert body["eviction_refusal"] is None
