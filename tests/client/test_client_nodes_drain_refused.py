"""``gpupool nodes`` and ``gpupool nodes drain`` of a draining node whose workload's eviction
a PodDisruptionBudget refused, against a live test server: they say the eviction was refused
and that gpupool asks again after the refusal's back-off (the nodes API's ``health``), not
that its workloads are being evicted."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.utils import timezone
from domain_builders import node
from two_teams import Pool, two_teams

from gpupool.client.main import main
from gpupool.control.actions import do_record_apply_outcome
from gpupool.inventory.actions import do_drain_node
from gpupool.inventory.models import Node
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED = (
    "draining: a PodDisruptionBudget refused the eviction of its workload: it keeps running, "
    "and gpupool asks again after the refusal's back-off; nothing here is being evicted now"
)


@pytest.fixture
def pool(live_client: Any) -> Pool:
    """Two 8-GPU h100 nodes; n2 is draining, its one workload ``nlp/guarded``'s eviction
    refused by ``nlp/guard``; the client talks to the live server as the admin ada."""

    def nodes(h100: Any) -> None:
        node("n1", h100, gpus=8)
        node("n2", h100, gpus=8)

    made = two_teams(nodes, ("fin", "lena", "max", "vera", "vic"), admins=("ada",))
    workload = do_submit_workload(
        "guarded",
        queue=made.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=8, flavor=made.h100)],
        submitter=made.users["max"],
    )
    placed = [PlacementSpec("main", 0, Node.objects.get(name="n2"), list(range(8)))]
    do_transition_workload(workload, "admitted", reason="fits", placements=placed)
    do_transition_workload(workload, "running", reason="its pods run")
    do_drain_node(Node.objects.get(name="n2"), acting_user=made.users["ada"], reason="RMA")
    Workload.objects.filter(pk=workload.pk).update(eviction_reason="admin")
    at = timezone.now()
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
                "nodes": ["n2"],
                "detail": "Eviction (a drain) refused by PodDisruptionBudget nlp/guard",
            }
        },
    )
    live_client(made.users["ada"])
    return made


def run(*argv: str) -> str:
    """What the client writes (it must succeed)."""
    out, err = io.StringIO(), io.StringIO()
    assert main(list(argv), out=out, err=err) == 0, err.getvalue()
    return out.getvalue()


def test_nodes_says_the_refused_eviction_not_being_evicted(pool: Pool) -> None:
    rows = {line.split()[0]: line for line in run("nodes").splitlines()[1:]}
    assert rows["n2"].split()[:3] == ["n2", "h100", "draining"]
    # then why it is cordoned: the drain's note (by whom, when, why)
    _state, note = rows["n2"].split(f"{REFUSED}; ", 1)
    assert note.startswith("drained by ada at ") and note.endswith(": RMA")
    assert "its workloads are being evicted" not in rows["n2"]


def test_draining_it_again_says_what_it_waits_on(pool: Pool) -> None:
    said = run("nodes", "drain", "n2")
    assert said.startswith("n2 is draining (asked ")
    assert said.endswith(f"cordoned, and {REFUSED.removeprefix('draining: ')}.\n")
    assert "evicts its workloads at its next cycles" not in said
