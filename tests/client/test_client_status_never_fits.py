"""``gpupool status`` says a workload the core set aside as never fitting never fits, as
``gpupool why`` does (``explanation.never_fits``), instead of its bare reason ("topology"),
a queue position or an estimate: the workloads list API carries ``never_fits`` for it.

The never-fitting gang's explanation is the core's own (``domain_builders.core_explained``):
a gang bound to one NVLink domain that no domain could ever hold is ``topology`` (DESIGN 3),
where a hand-written copy kept the ``capacity`` the core once said."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from client_cli import run
from django.utils import timezone
from domain_builders import (
    core_explained,
    explained,
    flavor,
    node,
    priority_class,
    queue,
    quota,
    tenant,
    user,
)

from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pending_pair(live_client: Any) -> None:
    """Two 8-GPU h100 nodes, each its own domain; lena's queue holds ``dom-big`` (2 x 8 bound
    to one domain: never fits) and ``small`` (waits for quota, position 1)."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    node("n2", h100, gpus=8)
    priority_class("normal", default=True)
    lena = user("lena")
    nlp = tenant("nlp", lead=lena, namespaces=("nlp",))
    train = queue("nlp-train", parent=queue("root"), tenant=nlp)
    quota(train, h100, 0, 16, 16)
    big = do_submit_workload(
        "dom-big",
        queue=train,
        pod_sets=[PodSetSpec(count=2, gpus=8, flavor=h100)],
        topology="domain",
    )
    never = core_explained(big)  # the core's reason, sentence and facts
    assert never.reason == "topology" and never.facts["never_fits"], never
    small = do_submit_workload(
        "small", queue=train, pod_sets=[PodSetSpec(count=1, gpus=4, flavor=h100)]
    )
    explained(small, "quota", "Queue nlp-train has 0 h100 GPUs of quota available.", {}, 1.0)
    now = timezone.now()
    do_finish_cycle(do_start_cycle(at=now - timedelta(seconds=1)), at=now, status="succeeded")
    live_client(lena)


def test_status_says_a_workload_never_fits_as_why_does(pending_pair: None) -> None:
    status, out, err = run("status")
    assert status == 0, err
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("nlp/")}
    assert lines["nlp/dom-big"].rstrip().endswith("topology, never fits")
    assert lines["nlp/small"].rstrip().endswith("quota")
    assert "never fits" not in lines["nlp/small"]
    # the same words as `gpupool why`
    status, out, _ = run("why", "nlp/dom-big")
    assert status == 0 and "(reason: topology, never fits)" in out


def test_the_workloads_list_carries_never_fits(pending_pair: None) -> None:
    status, out, err = run("status", "--json")
    assert status == 0, err
    never = {row["name"]: row["never_fits"] for row in json.loads(out)}
    assert never == {"dom-big": True, "small": False}
