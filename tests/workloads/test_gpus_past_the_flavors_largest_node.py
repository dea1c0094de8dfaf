"""A pod asking more GPUs than the largest node of its flavor is refused with the flavor's
rule whatever the number: 99 GPUs per pod on h100 (largest node 8) read "the largest h100
node has 8", as 9 to 64 did, where the API's and the form's own field bound refused it first
with the core's bound ("at most 64 (MIG: instances), the most one node may have ..."),
before the flavor was known. The core's bound is said only where no flavor's rule applies
(a flavor without nodes yet). One rule (``workloads.actions.pod_set_spec_errors``) for the
submission action, the API and its dry-run, the submit page and the CLI."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.test import Client
from domain_builders import flavor, node
from rest_framework.test import APIClient
from two_teams import Pool, two_teams

from gpupool.api.actions import do_issue_token
from gpupool.client.main import main
from gpupool.inventory.models import Flavor
from gpupool.workloads.actions import TOO_MANY_GPUS_PER_POD, PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool(db: Any) -> Pool:
    """nlp's queue on h100, whose largest node (n1) has 8 GPUs; flavor gb300 has no node yet."""
    cache.clear()  # the dry-run's snapshot is cached by cycle id, which repeats between tests
    made = two_teams(lambda h100: node("n1", h100, gpus=8), ("max", "lena", "vera", "fin"))
    flavor("gb300", gpu_memory_gb=288)
    return made


def flavors_rule(gpus: int) -> str:
    return f"{gpus} GPUs per pod, and a pod runs on one node: the largest h100 node has 8"


def cores_bound(gpus: int) -> str:
    return f"{gpus} GPUs per pod: {TOO_MANY_GPUS_PER_POD}"


# (GPUs per pod, flavor, what the refusal says)
CASES = [
    (9, "h100", flavors_rule(9)),
    (64, "h100", flavors_rule(64)),
    (65, "h100", flavors_rule(65)),
    (99, "h100", flavors_rule(99)),
    (40_000, "h100", flavors_rule(40_000)),  # past the column's range too
    (65, "gb300", cores_bound(65)),  # no node of gb300 yet: no flavor's rule applies
    (40_000, "gb300", cores_bound(40_000)),
]
IDS = [f"{gpus} on {name}" for gpus, name, _ in CASES]


@pytest.mark.parametrize(("gpus", "name", "said"), CASES, ids=IDS)
def test_the_submission_action_says_the_flavors_rule_first(
    pool: Pool, gpus: int, name: str, said: str
) -> None:
    with pytest.raises(ValidationError) as refusal:
        do_submit_workload(
            "big",
            queue=pool.nlp_queue,
            pod_sets=[
                PodSetSpec(1, gpus=gpus, flavor=Flavor.objects.get(name=name), image="python:3.12")
            ],
            submitter=pool.users["max"],
        )
    assert refusal.value.message_dict == {"pod_sets.0.gpus": [said]}
    assert not Workload.objects.exists()


@pytest.mark.parametrize("route", ["/api/v1/workloads/", "/api/v1/workloads/dry-run/"])
@pytest.mark.parametrize(("gpus", "name", "said"), CASES, ids=IDS)
def test_the_api_and_its_dry_run_say_it(
    pool: Pool, route: str, gpus: int, name: str, said: str
) -> None:
    client = APIClient()
    client.force_authenticate(pool.users["max"])
    pod_set = {"count": 1, "gpus": gpus, "flavor": name, "image": "python:3.12"}
    answer = client.post(route, {"name": "big", "queue": "nlp", "pod_sets": [pod_set]}, "json")
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"]["fields"] == {"pod_sets.0.gpus": [said]}
    assert not Workload.objects.exists()


@pytest.mark.parametrize(("gpus", "name", "said"), CASES, ids=IDS)
def test_the_submit_page_says_it_beside_gpus_per_pod(
    pool: Pool, gpus: int, name: str, said: str
) -> None:
    client = Client()
    client.force_login(pool.users["max"])
    form = {
        "name": "big",
        "queue": "nlp",
        "flavor": name,
        "pods": "1",
        "gpus_per_pod": str(gpus),
        "image": "python:3.12",
    }
    response = client.post("/workloads/submit/", form)
    assert response.status_code == 400
    assert response.context["form"].errors == {"gpus_per_pod": [said]}
    assert not Workload.objects.exists()


def run(*argv: str) -> tuple[int, str, str]:
    """The client's exit status, standard output and standard error."""
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


@pytest.mark.django_db(transaction=True)
def test_the_cli_says_it_naming_its_flag(
    pool: Pool, live_server: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("GPUPOOL_URL", live_server.url)
    monkeypatch.setenv("GPUPOOL_TOKEN", do_issue_token(pool.users["max"]).key)
    flags = ("--name", "big", "--queue", "nlp", "--flavor", "h100", "--image", "python:3.12")
    for verb in ("submit", "dry-run"):
        status, out, err = run(verb, *flags, "--gpus", "99")
        assert (status, out) == (1, ""), verb
        assert err == f"gpupool: pod_sets.0.gpus (--gpus): {flavors_rule(99)}\n", verb
    assert not Workload.objects.exists()
