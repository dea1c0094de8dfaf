"""The what-if of a quota request replays on the nodes the pages see: what other schedulers'
pods hold, as the control loop last recorded it on the nodes (``Node.foreign_usage``), is
taken, as the heatmap, fragmentation and dry-run take it (``control.queries``,
``with_recorded_usage``). It replayed on the inventory's nodes, which counted those GPUs as
free, so it promised a team capacity that another scheduler held."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from domain_builders import flavor, node, priority_class, queue, quota, tenant, user

from gpupool.clusters.base import ResourceAmounts
from gpupool.control.clock import pool_now
from gpupool.inventory.actions import do_record_foreign_usage
from gpupool.quotas import whatif
from gpupool.quotas.actions import do_create_quota_request, do_start_what_if
from gpupool.quotas.models import QuotaRequest
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db

HOUR = 3600
NODE_GPUS = 8


@pytest.fixture
def request_with_demand(monkeypatch: pytest.MonkeyPatch) -> tuple[QuotaRequest, Any]:
    """32 h100 GPUs (four 8-GPU nodes); queue nlp (4 / 8 / 16) asks for a capability of 24.

    Yesterday, at one instant, nlp queued six 8-GPU jobs of an hour each: today's capability
    runs them two at a time, the proposed one three at a time when the pool has the GPUs."""
    monkeypatch.setattr(whatif, "dispatch_what_if", lambda run_id: None)
    h100 = flavor("h100")
    for index in range(4):
        node(f"n{index}", h100, gpus=NODE_GPUS)
    lead, admin = user("lead"), user("ada", admin=True)
    team = tenant("nlp", lead=lead)
    team_queue = queue("nlp", parent=queue("root"), tenant=team)
    quota(team_queue, h100, 4, 8, 16)
    priority_class("normal", default=True)
    yesterday = pool_now() - timedelta(days=1)
    for index in range(6):
        do_submit_workload(
            f"nlp-{index}",
            queue=team_queue,
            pod_sets=[PodSetSpec(count=1, gpus=NODE_GPUS, flavor=h100)],
            expected_runtime_s=HOUR,
            at=yesterday,
        )
    request = do_create_quota_request(
        kind="queue-quota",
        tenant=team,
        requested_by=lead,
        justification="the new model needs more",
        payload={"guarantee": 4, "deserved": 8, "capability": 24},
        queue=team_queue,
        flavor=h100,
        submit=True,
    )
    return request, admin


def what_if(request: QuotaRequest, admin: Any) -> dict[str, Any]:
    """Start a two-day what-if of the request and run it to its end: its result."""
    run = whatif.run_what_if(do_start_what_if(request, acting_user=admin, days=2).pk)
    assert run is not None and run.state == "succeeded", run and run.error
    assert isinstance(run.result, dict)
    return run.result


def test_gpus_another_scheduler_holds_are_not_promised_by_the_what_if(
    request_with_demand: tuple[QuotaRequest, Any],
) -> None:
    request, admin = request_with_demand
    # given the whole pool free, the change lets nlp run a third job beside the other two
    free = what_if(request, admin)
    mean = free["wait_changes"]["nlp"]["wait_mean_s"]
    assert mean["after"] < mean["before"]
    assert (free["pool_gpus"], free["foreign_gpus"]) == (4 * NODE_GPUS, 0)

    # when the loop records that another scheduler's pods hold two whole nodes
    held = ResourceAmounts(cpu_milli=4000, memory_mib=8192, gpus=NODE_GPUS).as_json()
    assert do_record_foreign_usage({"n2": held, "n3": held}) == 2
    taken = what_if(request, admin)

    # then the replays see the 16 GPUs left, as the pages do: the change can run no third
    # job, so it promises nlp no shorter wait, and the result says what it counted as taken
    mean_taken = taken["wait_changes"]["nlp"]["wait_mean_s"]
    assert (taken["pool_gpus"], taken["foreign_gpus"]) == (2 * NODE_GPUS, 2 * NODE_GPUS)
    assert mean_taken["before"] == mean["before"]
    assert mean_taken["after"] == mean_taken["before"] and mean_taken["change"] == 0
    assert mean_taken["after"] > mean["after"]
    # the held GPUs come back when those pods end, so no job is set aside as never fitting
    assert taken["set_aside"]["after"]["count"] == 0
