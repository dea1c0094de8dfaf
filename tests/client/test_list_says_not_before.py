"""A pending workload without an estimated start whose estimates looked ahead to a time
without starting it says "not before <time>" in the lists too, as its page and ``gpupool
why`` do: the workloads API's rows carry ``estimate_not_before``, the My workloads table and
``gpupool status`` show it (walk finding 11: nlp/cli-wait showed a dash in both lists while its
page said "not before 2026-12-07 11:06")."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

import pytest
from client_cli import run
from django.test import Client
from django.utils import timezone
from domain_builders import explained, flavor, node, priority_class, queue, quota, tenant, user

from gpupool.api.actions import do_issue_token
from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiting(live_client: Any) -> dict[str, Any]:
    """lena's ``cli-wait`` waits for quota; the estimates looked three hours ahead without
    starting it. ``estimated`` has an estimated start of its own, for comparison."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    priority_class("normal", default=True)
    lena = user("lena")
    train = queue(
        "nlp-train", parent=queue("root"), tenant=tenant("nlp", lead=lena, namespaces=("nlp",))
    )
    quota(train, h100, 0, 8, 8)
    now = timezone.now()
    bound = (now + timedelta(hours=3)).replace(second=0, microsecond=0)
    spec = [PodSetSpec(count=1, gpus=4, flavor=h100)]
    wait = do_submit_workload("cli-wait", queue=train, pod_sets=spec)
    explained(wait, "quota", "Queue nlp-train has 0 h100 GPUs of quota available.",
              {"estimate_not_before": bound.isoformat()}, 1.0)  # fmt: skip
    do_finish_cycle(do_start_cycle(at=now - timedelta(seconds=1)), at=now, status="succeeded")
    live_client(lena)
    return {"lena": lena, "bound": bound}


def test_the_api_list_status_and_page_say_not_before(waiting: dict[str, Any]) -> None:
    bound = waiting["bound"]
    minute = bound.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    # the API's list row carries the bound
    web = Client()
    web.force_login(waiting["lena"])
    token = do_issue_token(waiting["lena"]).key
    rows = web.get("/api/v1/workloads/", HTTP_AUTHORIZATION=f"Bearer {token}").json()["results"]
    (row,) = [row for row in rows if row["name"] == "cli-wait"]
    assert row["estimated_start_at"] is None
    assert row["estimate_not_before"].startswith(bound.astimezone(UTC).strftime("%Y-%m-%dT%H:%M"))
    # gpupool status says it in the ESTIMATED START column
    status, out, err = run("status")
    assert status == 0, err
    header, *lines = out.splitlines()
    column = header.index("ESTIMATED START")
    (line,) = [line for line in lines if line.startswith("nlp/cli-wait")]
    assert line[column:].startswith(f"not before {minute} UTC")
    # and gpupool why still says the same bound
    status, out, err = run("why", "nlp/cli-wait")
    assert status == 0, err
    assert f"not before {minute} UTC" in out
    # the My workloads table says it too, not a dash
    page = web.get("/workloads/").content.decode()
    cell = page.split("nlp/cli-wait", 1)[1].split("</tr>", 1)[0]
    assert "not before <time" in cell and minute in cell
