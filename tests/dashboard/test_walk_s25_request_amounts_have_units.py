"""Walk s25: a lead's queue-quota request said its levels without their unit ("queue nlp h100:
guarantee 36, deserved 53, capability 160") on Requests, on the request's page and in the
messages and mails, beside the table "Your queues' quotas now" that writes "32 GPUs": every
level now says its flavor's unit, GPUs or a MIG flavor's MIG instances, as the pages do."""

from __future__ import annotations

from typing import Any

from dashboard_pages import text
from two_teams import quota_request

from gpupool.inventory.choices import Sharing
from gpupool.inventory.models import Flavor
from gpupool.quotas.models import QuotaRequest


def test_a_queue_quota_requests_summary_says_each_level_in_gpus(pool: Any) -> None:
    request = quota_request(pool, guarantee="1.000", capability="16")
    assert (
        request.summary() == "queue nlp h100: guarantee 1 GPU, deserved 10 GPUs, capability 16 GPUs"
    )


def test_a_mig_flavors_request_says_its_levels_in_mig_instances(pool: Any) -> None:
    mig = Flavor(name="a100-3g.40gb", sharing=Sharing.MIG)
    request = QuotaRequest(
        kind="queue-quota",
        tenant=pool.nlp,
        queue=pool.nlp_queue,
        flavor=mig,
        payload={"guarantee": "2", "deserved": "5", "capability": "16"},
    )
    assert request.summary() == (
        "queue nlp a100-3g.40gb: guarantee 2 MIG instances, deserved 5 MIG instances, "
        "capability 16 MIG instances"
    )


def test_the_requests_page_and_the_requests_own_page_say_the_unit(pool: Any, page_as: Any) -> None:
    request = quota_request(pool, submit=True)
    lead = page_as("lena")
    for url in ("/requests/", f"/requests/{request.pk}/"):
        page = text(lead.get(url))
        assert "guarantee 6 GPUs, deserved 10 GPUs, capability 16 GPUs" in page, url
