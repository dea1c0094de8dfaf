"""Walk s23: the page of a MIG workload (Asks "16 MIG instances") said its scheduler's numbers
in GPUs ("GPUs asked 16 GPUs", "quota available 11 GPUs") and, never preempted, "0 GPU-h" of
progress lost, though a MIG victim's loss counts MIG instance-hours. The facts table and the
card now say the workload's own unit (``inventory.units``: the Asks card's); whole-GPU work
reads as before.

The pool (``conftest``): h100 nodes n1 and n2, and here MIG node m1 of flavor ``a100-3g.40gb``
(``domain_builders.mig_beside``: a quota of 4 / 8 / 16 instances for nlp)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from dashboard_pages import text
from domain_builders import MIG_FLAVOR, explained, mig_beside

from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db


def waiting_on_quota(pool: Any, name: str, flavor: Any) -> None:
    """nlp's ``name``: 8 pods of 2 of ``flavor`` each, pending as a cycle explained it (16
    asked, 11 of the queue's quota available)."""
    spec = PodSetSpec(count=8, gpus=2, flavor=flavor)
    workload = do_submit_workload(name, queue=pool.nlp_queue, pod_sets=[spec])
    facts = {
        "queue": "nlp",
        "flavor": flavor.name,
        "asked_gpus": 16.0,
        "available_gpus": 11.0,
        "borrowing_capped": False,
        "never_fits": False,
    }
    explained(workload, "quota", "Queue nlp has too little quota.", facts, queue_rank=1.0)


def fact_cells(page: str) -> dict[str, tuple[str, str]]:
    """The facts table's rows by key: (label, value)."""
    found = re.findall(
        r'<tr data-fact="([a-z_]+)"><th scope="row">([^<]*)</th><td>([^<]*)</td></tr>', page
    )
    return {key: (label, value) for key, label, value in found}


def lost_card(page: str) -> str:
    """The value the "Progress lost to preemptions" card shows."""
    found = re.search(
        r'<p class="label">Progress lost to preemptions</p><p class="value">([^<]*)</p>', page
    )
    assert found is not None
    return found[1]


def test_a_mig_workloads_page_says_its_numbers_in_mig_instances(pool: Any, page_as: Any) -> None:
    mig = mig_beside(pool)
    assert mig.name == MIG_FLAVOR
    waiting_on_quota(pool, "slices", mig)
    page = text(page_as("max").get("/workloads/nlp/slices/"))
    facts = fact_cells(page)
    assert facts["asked_gpus"] == ("MIG instances asked", "16 MIG instances")
    assert facts["available_gpus"] == ("quota available", "11 MIG instances")
    assert lost_card(page) == "0 MIG instance-hours"
    assert "and the MIG instance-hours of progress lost." in page
    assert "GPU-h" not in lost_card(page)


def test_whole_gpu_work_keeps_its_gpus(pool: Any, page_as: Any) -> None:
    waiting_on_quota(pool, "whole", pool.h100)
    page = text(page_as("max").get("/workloads/nlp/whole/"))
    facts = fact_cells(page)
    assert facts["asked_gpus"] == ("GPUs asked", "16 GPUs")
    assert facts["available_gpus"] == ("quota available", "11 GPUs")
    assert lost_card(page) == "0 GPU-h"
    assert "and the GPU-hours of progress lost." in page
