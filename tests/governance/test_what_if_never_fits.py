"""The what-if of a quota request on a pool holding work that never fits (nlp queued a gang
larger than its capability): today's replay sets it aside, as the scheduler does, instead of
failing; a request raising the capability enough lets it in; the admin's page says which."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from gpupool.quotas import whatif
from gpupool.quotas.models import WhatIfRun
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

URL = "/api/v1/quota-requests/"
HOUR = 3600


def record_demand_with_a_never_fitting_gang(pool: Any) -> None:
    """Yesterday nlp queued two 8-GPU jobs of an hour and one of 3 x 8 GPUs, more than its
    capability of 16; vision one 8-GPU job."""
    yesterday = timezone.now() - timedelta(days=1)
    for name, queue, count in (
        ("nlp-0", pool.nlp_queue, 1),
        ("nlp-1", pool.nlp_queue, 1),
        ("nlp-huge", pool.nlp_queue, 3),
        ("vision-0", pool.vision_queue, 1),
    ):
        do_submit_workload(
            name,
            queue=queue,
            pod_sets=[PodSetSpec(count=count, gpus=8, flavor=pool.h100)],
            expected_runtime_s=HOUR,
            at=yesterday,
        )


def replayed(api_as: Any, request: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> WhatIfRun:
    """Start the request's what-if over two days as ada and run it here."""
    monkeypatch.setattr(whatif, "dispatch_what_if", lambda run_id: None)
    run = api_as("ada").post(f"{URL}{request['id']}/what-if/", {"days": 2}, format="json")
    assert run.status_code == 202, run.json()
    whatif.run_what_if(run.json()["id"])
    return WhatIfRun.objects.get(pk=run.json()["id"])


@pytest.mark.django_db
def test_a_what_if_on_a_pool_holding_never_fitting_work_succeeds_and_sets_it_aside(
    pool: Any, api_as: Any, file_request: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_demand_with_a_never_fitting_gang(pool)
    request = file_request(payload={"guarantee": 4, "deserved": 12, "capability": 16}, submit=True)
    run = replayed(api_as, request, monkeypatch)
    assert run.state == "succeeded", run.error
    assert run.result is not None
    aside = run.result["set_aside"]
    assert (aside["before"]["count"], aside["after"]["count"]) == (1, 1)
    assert aside["before"]["jobs"][0]["job"] == "nlp/nlp-huge"
    assert aside["before"]["jobs"][0]["detail"].startswith("Queue nlp can never hold 24 h100")
    assert run.result["tenants"]["nlp"]["before"]["jobs"] == 2


@pytest.mark.django_db
def test_a_request_raising_the_capability_includes_the_never_fitting_work_and_runs_it(
    pool: Any, api_as: Any, file_request: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_demand_with_a_never_fitting_gang(pool)
    request = file_request(payload={"guarantee": 4, "deserved": 12, "capability": 24}, submit=True)
    run = replayed(api_as, request, monkeypatch)
    assert run.state == "succeeded", run.error
    assert run.result is not None
    aside = run.result["set_aside"]
    assert (aside["before"]["count"], aside["after"]["count"]) == (1, 0)
    nlp = run.result["tenants"]["nlp"]
    assert (nlp["before"]["jobs"], nlp["after"]["jobs"]) == (2, 3)
    # and the admin's page says what each replay set aside
    page = Client()
    page.force_login(pool.users["ada"])
    html = page.get(f"/approvals/{request['id']}/what-if/").content.decode()
    assert "Set aside as never fitting" in html
    assert "<strong>1</strong> today, <strong>0</strong> with the change" in html
    assert "today: nlp/nlp-huge: Queue nlp can never hold 24 h100 GPUs" in html
