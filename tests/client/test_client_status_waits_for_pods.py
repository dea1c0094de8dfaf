"""``gpupool status`` and ``gpupool why`` give a gang that waits for pods its controller has
not made yet no queue position, and say it waits for its pods, as the API
(``waits_for_pods``) and the pages do; the work ranked with it keeps its position."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from client_cli import run
from django.utils import timezone
from domain_builders import explained, flavor, node, priority_class, queue, quota, tenant, user

from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ranked(live_client: Any) -> None:
    """lena's queue as a cycle ranked it: ``job-gang`` (a pod of its Job not made yet) first,
    ``small`` (waits for quota) second."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    priority_class("normal", default=True)
    lena = user("lena")
    train = queue(
        "nlp-train", parent=queue("root"), tenant=tenant("nlp", lead=lena, namespaces=("nlp",))
    )
    quota(train, h100, 0, 8, 8)
    for name, reason, detail, facts, rank in (
        ("job-gang", "gang", "1 of its pods does not exist yet.", {"missing_pods": 1}, 1.0),
        ("small", "quota", "Queue nlp-train has 0 h100 GPUs of quota available.", {}, 2.0),
    ):
        spec = [PodSetSpec(count=1, gpus=4, flavor=h100)]
        explained(do_submit_workload(name, queue=train, pod_sets=spec), reason, detail, facts, rank)
    now = timezone.now()
    do_finish_cycle(do_start_cycle(at=now - timedelta(seconds=1)), at=now, status="succeeded")
    live_client(lena)


def test_status_and_why_say_it_waits_for_its_pods_instead_of_a_position(ranked: None) -> None:
    status, out, err = run("status")
    assert status == 0, err
    header, *rows = out.splitlines()
    column = header.index("POSITION")
    cells = {row.split()[0]: row[column:].split("  ")[0] for row in rows if row.startswith("nlp/")}
    assert cells == {"nlp/job-gang": "none: it waits for its pods", "nlp/small": "2"}
    status, out, err = run("why", "nlp/job-gang")
    assert status == 0, err
    assert "Position: none: it waits for its pods (1 not created yet)\n" in out
    assert "Estimated start: none: it waits for its pods (1 not created yet)\n" in out
