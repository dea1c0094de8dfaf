"""A workload reclaimed for idleness ends there (it is not requeued), and a bare pod evicted
ends there too: the API's workload detail, the CLI's ``gpupool why`` (which prints the API's
summary) and the workload's page all say so in the same words, those of
``workloads.queries.summary``; other preempted work is said to go back to its queue."""

from __future__ import annotations

import io
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from domain_builders import node
from rest_framework.test import APIClient
from two_teams import Pool, submit, two_teams

from gpupool.accounting.actions import do_record_preemption
from gpupool.client.main import print_story
from gpupool.inventory.units import FlavorUnits
from gpupool.workloads.models import Workload
from gpupool.workloads.queries import AS_WRITTEN, explain

ENDS = "It ends here and is not requeued (it would only sit idle again)."
REQUEUED = "goes back to its queue"


@pytest.fixture
def pool(db: Any) -> Pool:
    """Two 8-GPU nodes shared by nlp and vision; max is a member of nlp."""

    def nodes(h100: Any) -> None:
        node("n1", h100, gpus=8)
        node("n2", h100, gpus=8)

    return two_teams(nodes, ("lena", "max", "vera", "fin"), admins=("ada",))


def preempted(pool: Pool, name: str, reason: str, origin: str = "gpupool") -> Workload:
    """A workload the control loop evicted for ``reason`` and left preempted."""
    workload = submit(pool, name, pool.nlp_queue, "max")
    Workload.objects.filter(pk=workload.pk).update(state="preempted", origin=origin)
    do_record_preemption(
        workload, reason=reason, at=timezone.now(), gpus_freed=8, lost_gpu_hours=Decimal(0)
    )
    return workload


def detail(pool: Pool, name: str) -> dict[str, Any]:
    """The API's workload detail, as max reads it."""
    client = APIClient()
    client.force_authenticate(pool.users["max"])
    response = client.get(f"/api/v1/workloads/nlp/{name}/")
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def why(body: dict[str, Any]) -> str:
    """What ``gpupool why`` prints for the API's detail."""
    out = io.StringIO()
    print_story(body, out)
    return out.getvalue()


@pytest.mark.django_db
def test_the_api_and_the_cli_say_an_idle_reclaimed_workload_ends_and_is_not_requeued(
    pool: Pool,
) -> None:
    preempted(pool, "notebook", "idle")
    body = detail(pool, "notebook")
    summary = body["explanation"]["summary"]
    assert summary.startswith("Reclaimed at ") and ENDS in summary, summary
    assert REQUEUED not in summary
    printed = why(body)
    assert ENDS in printed and REQUEUED not in printed


@pytest.mark.django_db
def test_the_page_shows_the_same_words_as_the_api(pool: Pool, client: Any) -> None:
    preempted(pool, "notebook", "idle")
    client.force_login(pool.users["max"])
    page = client.get("/workloads/nlp/notebook/").content.decode()
    said = detail(pool, "notebook")["explanation"]["summary"]
    assert said in page and REQUEUED not in page


@pytest.mark.django_db
def test_an_evicted_bare_pod_ends_and_other_preempted_work_goes_back_to_its_queue(
    pool: Pool,
) -> None:
    preempted(pool, "by-hand", "admin", origin="bare")  # drained: no preemptor to name
    bare = detail(pool, "by-hand")["explanation"]["summary"]
    assert "A bare pod is gone once evicted, so it ends here and is not requeued." in bare
    assert "(admin" in bare and REQUEUED not in bare
    requeued = preempted(pool, "sweep", "admin")
    assert REQUEUED in detail(pool, "sweep")["explanation"]["summary"]
    unprefetched = Workload.objects.get(pk=requeued.pk)  # the one rule reads its events itself
    assert REQUEUED in explain(unprefetched, seen=AS_WRITTEN, units=FlavorUnits()).summary
