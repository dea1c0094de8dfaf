"""``gpupool why`` of work a node's drain evicted, against a live test server: under the
preemption it says which node was drained, by whom and why, in the words of the workload's
page and summary (``workloads.queries.eviction_drain_words``) -- and never another drained
node of the same flavor, nor anything for a preemption no drain explains."""

from __future__ import annotations

import io
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from domain_builders import node
from two_teams import Pool, submit, two_teams

from gpupool.accounting.actions import do_record_preemption
from gpupool.client.main import main
from gpupool.inventory.actions import do_drain_node
from gpupool.inventory.models import Node
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload
from gpupool.workloads.queries import eviction_drain_words, node_drains

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pool(live_client: Any) -> Pool:
    """Two 8-GPU h100 nodes (n1, n2) for teams nlp (lead lena, member max) and vision
    (lead vera, member vic); ada is an admin; the client talks to the live server as max."""

    def nodes(h100: Any) -> None:
        node("n1", h100, gpus=8)
        node("n2", h100, gpus=8)

    made = two_teams(
        nodes, ("fin", "lena", "max", "vera", "vic"), admins=("ada",), vision_members=("vic",)
    )
    live_client(made.users["max"])
    return made


def why(name: str) -> str:
    """What ``gpupool why nlp/<name>`` writes (it must succeed)."""
    out, err = io.StringIO(), io.StringIO()
    status = main(["why", f"nlp/{name}"], out=out, err=err)
    assert status == 0, err.getvalue()
    return out.getvalue()


def running_on(pool: Pool, name: str, *nodes: str) -> Workload:
    """A workload of one pod per node (8 GPUs each), admitted and running on ``nodes``."""
    workload = do_submit_workload(
        name,
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=len(nodes), gpus=8, flavor=pool.h100)],
        submitter=pool.users["max"],
    )
    pods = [
        PlacementSpec("main", index, Node.objects.get(name=each), list(range(8)))
        for index, each in enumerate(nodes)
    ]
    do_transition_workload(workload, "admitted", reason="fits", placements=pods)
    do_transition_workload(workload, "running", reason="its pods run")
    return workload


def drain(pool: Pool, name: str, reason: str) -> None:
    do_drain_node(Node.objects.get(name=name), acting_user=pool.users["ada"], reason=reason)


def evicted_for_drain(workload: Workload) -> str:
    """Record the loop's eviction of ``workload`` for a drain (with the nodes it ran on) and
    requeue it; the page's words for the drain that caused it."""
    event = do_record_preemption(
        workload, reason="admin", at=timezone.now(), gpus_freed=8, lost_gpu_hours=1
    )
    do_transition_workload(workload, "preempted", reason="evicted (admin)")
    do_transition_workload(workload, "pending", reason="requeued")
    drains = node_drains([(event.pk, event.reason, event.at, event.nodes)])
    return eviction_drain_words(drains.get(event.pk, ()))


def under(out: str, event: str) -> str:
    """The line ``gpupool why`` wrote right under the preemption whose line holds ``event``."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if event in line)
    return lines[at + 1]


def test_why_says_which_node_was_drained_by_whom_and_why(pool: Pool) -> None:
    workload = running_on(pool, "train", "n1")
    preemptor = submit(pool, "vis-reclaim", pool.vision_queue, "vic")
    do_record_preemption(
        workload,
        reason="reclaim",
        at=timezone.now(),
        gpus_freed=8,
        lost_gpu_hours=Decimal("0.5"),
        preemptor=preemptor,
    )
    drain(pool, "n2", "rack move")  # same flavor, not where it ran
    drain(pool, "n1", "swap PSU")
    words = evicted_for_drain(workload)
    assert words == "for the drain of node n1, drained by ada: swap PSU"
    out = why("train")
    assert under(out, " admin on n1; 8 GPUs freed").strip() == words, out
    # A preemption no drain explains says none; another team's preemptor stays unnamed.
    assert not under(out, " reclaim by a workload of queue vision").startswith("    "), out
    assert out.count("for the drain of") == 1 and "rack move" not in out
    assert "vis-reclaim" not in out


def test_why_names_each_drained_node_and_a_missing_reason_as_the_page_does(pool: Pool) -> None:
    workload = running_on(pool, "wide", "n1", "n2")
    drain(pool, "n1", "swap PSU")
    drain(pool, "n2", "")
    words = evicted_for_drain(workload)
    assert "node n2, drained by ada (no reason given)" in words  # the page's own words
    out = why("wide")
    assert under(out, " admin on n1, n2; 8 GPUs freed").strip() == words, out


def test_why_says_an_eviction_a_disruption_budget_refused_while_it_is_current(
    pool: Pool,
) -> None:
    """A running workload whose drain eviction a PodDisruptionBudget refused: ``why`` says
    when and the sentence its pods were told (``eviction_refusal``), as its page does."""
    from gpupool.control.actions import do_record_apply_outcome

    workload = running_on(pool, "guarded", "n1")
    Workload.objects.filter(pk=workload.pk).update(eviction_reason="admin")
    at = timezone.now()
    sentence = "Eviction (a drain) refused by PodDisruptionBudget nlp/guard, which needs 1"
    do_record_apply_outcome(
        at=at,
        bind_failed={},
        refused={workload.pk: "refused"},
        refusals={
            workload.pk: {
                "at": at.isoformat(),
                "budget": "nlp/guard",
                "needs": "1 healthy pods and has 1 currently",
                "reason": "admin",
                "nodes": ["n1"],
                "detail": sentence,
            }
        },
    )
    said = why("guarded")
    assert f": {sentence}\n" in said
    assert said.count("Eviction refused at ") == 1
    Workload.objects.filter(pk=workload.pk).update(eviction_refusal=None)
    assert "Eviction refused" not in why("guarded")
