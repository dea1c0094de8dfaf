"""From a walk of the real Kubernetes path (s20): what a workload's history says, it says once.
A move to admitted recorded as "admitted: quota and capacity allow it" read "pending ->
admitted: admitted: quota and capacity allow it" in ``gpupool why`` and on its page (the API's
``timeline`` reason repeated the state); a bare pod evicted outside gpupool read "Preempted at
... (admin (drain or manual eviction))"."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework.test import APIClient
from two_teams import submit

from gpupool.accounting.actions import do_record_preemption
from gpupool.inventory.models import Node
from gpupool.workloads.actions import PlacementSpec, do_transition_workload
from gpupool.workloads.choices import Origin
from gpupool.workloads.models import Workload
from gpupool.workloads.queries import preempted_summary

ADMITTED = "admitted: quota and capacity allow it"


def admitted_and_running(pool: Any, name: str) -> Workload:
    workload = submit(pool, name, pool.nlp_queue, "max")
    pod = PlacementSpec("main", 0, Node.objects.get(name="n2"), list(range(8)))
    do_transition_workload(workload, "admitted", reason=ADMITTED, placements=[pod])
    do_transition_workload(workload, "running", reason="its pods run")
    return workload


def test_a_move_to_admitted_says_admitted_once_in_the_api_and_on_its_page(
    pool: Any, page_as: Any
) -> None:
    workload = admitted_and_running(pool, "once")
    api = APIClient()
    api.force_authenticate(pool.users["max"])
    timeline = api.get(f"/api/v1/workloads/nlp/{workload.name}/").json()["timeline"]
    admitted = next(step for step in timeline if step["to_state"] == "admitted")
    assert admitted["reason"] == "quota and capacity allow it"
    page = page_as("max").get(f"/workloads/nlp/{workload.name}/").content.decode()
    assert "quota and capacity allow it" in page
    assert ADMITTED not in page


def test_a_bare_pod_evicted_outside_gpupool_says_its_reason_in_one_pair_of_parentheses(
    pool: Any,
) -> None:
    workload = admitted_and_running(pool, "bare")
    Workload.objects.filter(pk=workload.pk).update(origin=Origin.BARE)
    do_record_preemption(
        workload, reason="admin", at=timezone.now(), gpus_freed=8, lost_gpu_hours=1
    )
    do_transition_workload(
        workload, "preempted", reason="pod bare was evicted outside gpupool (EvictionByEvictionAPI)"
    )
    said = preempted_summary(Workload.objects.get(pk=workload.pk))
    assert "(admin: drain or manual eviction)" in said, said
    assert "((" not in said and "))" not in said
