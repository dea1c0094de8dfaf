"""Workloads through the API, as the people who run them use it: submit, list and filter,
detail (timeline, explanation, position, estimate, preemptions), dry-run and cancel."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from csv_exports import downloaded, paged_as_csv
from django.utils import timezone
from domain_builders import explained, flavor
from resources_pool import pool, submit

from gpupool.accounting.actions import do_open_usage, do_record_preemption
from gpupool.api import tables
from gpupool.inventory.models import Node
from gpupool.quotas.models import PriorityClass
from gpupool.workloads.actions import TOO_MANY_GPUS_PER_POD, PlacementSpec, do_transition_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

URL = "/api/v1/workloads/"


def body(**fields: Any) -> dict[str, Any]:
    """A valid submission to nlp-train: one pod of 4 h100 GPUs running pytorch."""
    pod_set = {
        "count": 1,
        "gpus": 4,
        "flavor": "h100",
        "cpu": "8",
        "memory_gb": "64",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["python", "train.py", "--epochs=3"],
        "env": {"WANDB_MODE": "offline"},
    }
    values: dict[str, Any] = {"name": "bert-large", "queue": "nlp-train", "pod_sets": [pod_set]}
    return values | fields


def with_pod_set(**fields: Any) -> dict[str, Any]:
    """The valid submission with its pod set changed."""
    made = body()
    made["pod_sets"] = [made["pod_sets"][0] | fields]
    return made


def run_on(workload: Workload, node: str, gpus: list[int], minutes_ago: int = 60) -> None:
    """Admit and start ``workload`` on ``node`` ``minutes_ago``."""
    start = timezone.now() - timedelta(minutes=minutes_ago)
    placements = [PlacementSpec("main", 0, Node.objects.get(name=node), gpus)]
    do_transition_workload(workload, "admitted", reason="fits", at=start, placements=placements)
    do_transition_workload(workload, "running", reason="started", at=start)


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    return pool(world)


def test_a_member_submits_a_workload_and_gets_its_story(api_as: Any, resources: dict) -> None:
    response = api_as("member").post(URL, body(expected_runtime_s=3600), format="json")
    assert response.status_code == 201, response.content
    made = response.json()
    assert (made["namespace"], made["name"], made["queue"], made["tenant"]) == (
        "nlp",
        "bert-large",
        "nlp-train",
        "nlp",
    )
    assert made["submitter"] == "max" and made["state"] == "pending" and made["gpus"] == "4.000"
    assert made["priority_class"] == "normal" and made["expected_runtime_s"] == 3600
    pod_set = made["pod_sets"][0]
    assert pod_set["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert pod_set["command"] == ["python", "train.py", "--epochs=3"]
    assert pod_set["env"] == {"WANDB_MODE": "offline"}
    assert [(step["to_state"], step["reason"], step["actor"]) for step in made["timeline"]] == [
        ("pending", "submitted", "max")
    ]
    assert made["explanation"]["summary"] == "Waiting for the next scheduling cycle to look at it."
    assert Workload.objects.get(name="bert-large").pod_sets.get().cpu == Decimal(8)


BAD = [
    ("no image", with_pod_set(image=""), "pod_sets.0.image"),
    ("an unknown flavor", with_pod_set(flavor="b300"), "pod_sets.0.flavor"),
    ("a fraction of an exclusive GPU", with_pod_set(gpu_milli=500), "pod_sets.0.gpu_milli"),
    ("GPUs without a flavor", with_pod_set(flavor=None), "pod_sets.0.flavor"),
    ("an unknown choice", with_pod_set(flavor_choices=["b300"]), "pod_sets.0.flavor_choices.0"),
    ("a NUL in a choice", with_pod_set(flavor_choices=["h\x00"]), "pod_sets.0.flavor_choices.0"),
    ("a NUL in the flavor", with_pod_set(flavor="h100\x00"), "pod_sets.0.flavor"),
    ("a NUL in the queue", body(queue="nlp\x00"), "queue"),
    ("a flavor chosen twice", with_pod_set(flavor_choices=["h100"]), "pod_sets.0.flavor_choices"),
    ("a bad variable name", with_pod_set(env={"2FAST": "1"}), "pod_sets.0.env"),
    ("a command that is not a list", with_pod_set(command="python train.py"), "pod_sets.0.command"),
    ("no pods", with_pod_set(count=0), "pod_sets.0.count"),
    ("no pod sets", body(pod_sets=[]), "pod_sets"),
    ("another tenant's queue", body(queue="vision-train"), "queue"),
    ("an inner queue", body(queue="root"), "queue"),
    ("an unknown queue", body(queue="nope"), "queue"),
    ("a namespace the tenant does not own", body(namespace="vision"), "namespace"),
    ("an unknown class", body(priority_class="platinum"), "priority_class"),
    ("protection past the free maximum", body(protected_runtime_s=7200), "protected_runtime_s"),
    ("a gang larger than the pods", body(min_member=2), "min_member"),
    ("an unknown topology", body(topology="rack"), "topology"),
    ("a name that is not a DNS label", body(name="Bert_Large"), "name"),
    ("a name already taken", body(name="train-1"), "name"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "payload", "field"), BAD, ids=[case[0] for case in BAD])
def test_a_bad_submission_answers_400_naming_the_field(
    api_as: Any, resources: dict, case: str, payload: dict, field: str
) -> None:
    response = api_as("member").post(URL, payload, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert field in error["fields"], error
    assert not Workload.objects.filter(name="bert-large").exists()


def test_a_member_naming_an_inner_queue_is_told_it_is_not_a_leaf(
    api_as: Any, resources: dict
) -> None:
    """The queue tree is public: a member was told the root "belongs to no tenant, of which
    you are not a member" where an admin heard the truth."""
    response = api_as("member").post(URL, body(queue="root"), format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["queue"] == [
        "root has child queues; workloads go to leaf queues"
    ]


def test_a_pod_no_node_could_hold_is_refused_naming_the_field(api_as: Any, resources: dict) -> None:
    """1000 GPUs per pod (past the decision core's bound), and 16 where the largest h100 node
    has 8 (a pod runs on one node): 400 naming ``pod_sets.0.gpus``, submitted or tried."""
    for gpus in (1000, 16):
        for url in (URL, URL + "dry-run/"):
            response = api_as("member").post(url, with_pod_set(gpus=gpus), format="json")
            assert response.status_code == 400, response.content
            assert "pod_sets.0.gpus" in response.json()["error"]["fields"], response.content
    nine = body(pod_sets=[body()["pod_sets"][0] | {"name": f"p{i}"} for i in range(9)])
    response = api_as("member").post(URL, nine, format="json")
    assert response.status_code == 400 and "pod_sets" in response.json()["error"]["fields"]
    assert not Workload.objects.filter(name="bert-large").exists()


def test_a_pod_set_of_no_gpus_is_taken_as_the_model_takes_it(api_as: Any, resources: dict) -> None:
    """A launcher's pod set: no GPUs, CPU only, with or without a flavor."""
    launcher = {"name": "launcher", "count": 1, "gpus": 0, "cpu": "2", "image": "mpi:5"}
    payload = body()
    payload["pod_sets"].append(launcher)
    response = api_as("member").post(URL, payload, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["gpus"] == "4.000"


def test_a_shared_flavor_pod_set_asks_a_fraction_and_may_list_further_choices(
    api_as: Any, resources: dict
) -> None:
    flavor("l40s", sharing="shared", gpu_memory_gb=48)
    flavor("l4", sharing="shared", gpu_memory_gb=24)
    payload = with_pod_set(flavor="l40s", gpus=1, gpu_milli=470, flavor_choices=["l4"])
    response = api_as("lead").post(URL, payload, format="json")
    assert response.status_code == 201, response.content
    pod_set = response.json()["pod_sets"][0]
    assert (pod_set["flavor"], pod_set["flavor_choices"], pod_set["gpu_milli"]) == (
        "l40s",
        ["l4"],
        470,
    )
    assert response.json()["gpus"] == "0.470"


def test_the_list_shows_only_the_callers_tenants_and_filters(api_as: Any, resources: dict) -> None:
    submit("sweep-1", resources["nlp"], resources["own_workload"].submitter, gpus=1)
    running = submit("serve", resources["nlp"], resources["own_workload"].submitter, gpus=2)
    run_on(running, "n1", [0, 1])
    explained(Workload.objects.get(name="sweep-1"), "quota", queue_rank=1.0)

    def names(role: str, query: str = "") -> list[str]:
        response = api_as(role).get(URL + query)
        assert response.status_code == 200, response.content
        return sorted(f"{w['namespace']}/{w['name']}" for w in response.json()["results"])

    assert names("member") == ["nlp/serve", "nlp/sweep-1", "nlp/train-1"]
    assert len(names("admin")) == 4
    assert names("member", "?state=running") == ["nlp/serve"]
    assert names("member", "?state=running&state=pending") == names("member")
    assert names("member", "?reason=quota") == ["nlp/sweep-1"]
    assert names("member", "?queue=nlp-train&submitter=lena") == names("member")
    assert names("admin", "?tenant=vision") == ["vision/train-1"]
    assert names("admin", "?namespace=vision") == ["vision/train-1"]
    assert names("member", "?tenant=vision") == []
    ordered = api_as("member").get(URL + "?ordering=-name").json()["results"]
    assert [w["name"] for w in ordered] == ["train-1", "sweep-1", "serve"]


def test_the_list_counts_positions_and_orders_by_them_unranked_work_last(
    api_as: Any, resources: dict
) -> None:
    lead = resources["own_workload"].submitter
    for name, rank in (("c", 30.0), ("a", -2.0), ("b", 7.25)):  # keys, not positions
        made = submit(name, resources["nlp"], lead, gpus=1)
        explained(made, "behind", queue_rank=rank)
    # train-1 is pending too, but no cycle ranked it yet: it has no position.
    answer = api_as("member").get(URL + "?queue=nlp-train&state=pending&ordering=queue_position")
    assert answer.status_code == 200, answer.content
    rows = [(w["name"], w["queue_position"]) for w in answer.json()["results"]]
    assert rows == [("a", 1), ("b", 2), ("c", 3), ("train-1", None)]
    backwards = api_as("member").get(URL + "?queue=nlp-train&ordering=-queue_position").json()
    assert [w["name"] for w in backwards["results"]] == ["c", "b", "a", "train-1"]
    Workload.objects.filter(name="a").update(state="cancelled")  # leaves: the rest move up
    detail = api_as("member").get(URL + "nlp/c/").json()
    assert detail["queue_position"] == detail["explanation"]["queue_position"] == 2


def test_the_list_downloads_as_csv_scoped_filtered_and_positioned_as_its_pages(
    api_as: Any, resources: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every workload the filters and the caller's scope keep, in batches (positions counted
    per batch as per page), equal to the JSON pages."""
    monkeypatch.setattr(tables, "CSV_BATCH", 2)
    lead = resources["own_workload"].submitter
    for name, rank in (("c", 30.0), ("a", -2.0), ("b", 7.25)):
        explained(submit(name, resources["nlp"], lead, gpus=1), "behind", queue_rank=rank)
    member = api_as("member")
    query = "?state=pending&ordering=queue_position"

    rows = downloaded(member, URL + query, "workloads")

    assert rows == paged_as_csv(member, URL + query)
    assert [(w["name"], w["queue_position"]) for w in rows] == [
        ("a", "1"),
        ("b", "2"),
        ("c", "3"),
        ("train-1", ""),
    ]
    everyone = downloaded(api_as("admin"), URL + "?ordering=name")
    assert everyone == paged_as_csv(api_as("admin"), URL + "?ordering=name")
    assert {w["tenant"] for w in everyone} == {"nlp", "vision"}
    assert {w["tenant"] for w in downloaded(member, URL)} == {"nlp"}
    # A bad filter asked as CSV: the 400 as one row that names the field, and no download.
    refused = member.get(URL + "?state=asleep&format=csv")
    assert refused.status_code == 400 and "Content-Disposition" not in refused
    assert refused.content.decode().splitlines()[1].startswith('400,invalid,"state: ')


def test_another_tenants_workload_answers_404(api_as: Any, resources: dict) -> None:
    for path in ("vision/train-1/", "nlp/missing/"):
        assert api_as("member").get(URL + path).status_code == 404
        assert api_as("lead").post(URL + path + "cancel/").status_code == 404
    assert api_as("admin").get(URL + "vision/train-1/").status_code == 200


def test_the_detail_explains_where_a_pending_workload_stands(api_as: Any, resources: dict) -> None:
    start = timezone.now() + timedelta(hours=2)
    ahead = submit("sweep-1", resources["nlp"], resources["own_workload"].submitter, gpus=1)
    explained(ahead, "behind", queue_rank=1.0)
    Workload.objects.filter(pk=resources["own_workload"].pk).update(estimated_start_at=start)
    explained(
        resources["own_workload"],
        "quota",
        "Queue nlp-train has 0 h100 GPUs of quota available, 4 asked.",
        {
            "queue": "nlp-train",
            "flavor": "h100",
            "asked_gpus": 4,
            "available_gpus": 0,
            "borrowing_capped": False,
            "never_fits": False,
            "estimate_learned": True,
        },
        queue_rank=2.0,
    )
    detail = api_as("member").get(URL + "nlp/train-1/").json()
    explanation = detail["explanation"]
    assert explanation["reason"] == "quota" and explanation["queue_position"] == 2
    assert explanation["facts"]["asked_gpus"] == 4 and explanation["estimate_learned"] is True
    assert explanation["estimated_start_at"] is not None
    assert explanation["summary"].startswith("Queue nlp-train has 0 h100 GPUs of quota available")
    assert "Position 2 in queue nlp-train." in explanation["summary"]
    assert "learned from similar work" in explanation["summary"]


def test_the_detail_says_who_preempted_it_why_and_what_it_cost(
    api_as: Any, resources: dict
) -> None:
    victim = resources["own_workload"]
    run_on(victim, "n1", [0, 1, 2, 3], minutes_ago=120)
    preemptor = resources["other_workload"]
    do_record_preemption(
        victim,
        reason="reclaim",
        at=timezone.now(),
        gpus_freed=4,
        lost_gpu_hours=Decimal("6.5"),
        preemptor=preemptor,
    )
    as_member = api_as("member").get(URL + "nlp/train-1/").json()
    failure, event = as_member["preemptions"]  # the pool's node failure, then the reclaim
    assert (failure["reason"], failure["preemptor_queue"]) == ("node-failure", None)
    assert (event["reason"], event["gpus_freed"], event["lost_gpu_hours"]) == (
        "reclaim",
        "4.000",
        "6.5000",
    )
    assert (event["preemptor_queue"], event["preemptor_tenant"], event["preemptor_class"]) == (
        "vision-train",
        "vision",
        "normal",
    )
    assert event["preemptor"] is None and event["preemptor_owner"] is None
    assert as_member["lost_gpu_hours"] == "8.5000"  # 2 for the node failure, 6.5 reclaimed
    seen_by_admin = api_as("admin").get(URL + "nlp/train-1/").json()["preemptions"][1]
    assert (seen_by_admin["preemptor"], seen_by_admin["preemptor_owner"]) == (
        "vision/train-1",
        "vera",
    )


def test_cancelling_running_work_closes_its_usage(api_as: Any, resources: dict) -> None:
    workload = resources["own_workload"]
    run_on(workload, "n1", [0, 1, 2, 3])
    workload.refresh_from_db()
    do_open_usage(workload, flavor=resources["h100"], gpus=4, at=workload.started_at)
    response = api_as("lead").post(URL + "nlp/train-1/cancel/", {"reason": "bad data"})
    assert response.status_code == 200, response.content
    cancelled = response.json()
    assert cancelled["state"] == "cancelled" and cancelled["placements"] == []
    last = cancelled["timeline"][-1]
    assert (last["from_state"], last["to_state"], last["reason"], last["actor"]) == (
        "running",
        "cancelled",
        "bad data",
        "lena",
    )
    assert workload.usage.get().ended_at is not None
    again = api_as("lead").post(URL + "nlp/train-1/cancel/")
    assert again.status_code == 400 and "state" in again.json()["error"]["fields"]


def test_a_member_cancels_what_they_submitted_but_not_a_colleagues(
    api_as: Any, resources: dict
) -> None:
    api_as("member").post(URL, body(), format="json")
    assert api_as("member").post(URL + "nlp/bert-large/cancel/").status_code == 200
    refused = api_as("member").post(URL + "nlp/train-1/cancel/")
    assert refused.status_code == 403
    assert Workload.objects.get(namespace="nlp", name="train-1").state == "pending"


@pytest.mark.parametrize("extra", [0, 12])
def test_the_list_costs_the_same_queries_however_long(
    api_as: Any, resources: dict, django_assert_max_num_queries: Any, extra: int
) -> None:
    lead = resources["own_workload"].submitter
    for index in range(extra):
        submit(f"job-{index}", resources["nlp"], lead, gpus=1)
    client = api_as("member")
    with django_assert_max_num_queries(6):
        response = client.get(URL)
    assert response.json()["count"] == 1 + extra


@pytest.mark.parametrize("events", [0, 6])
def test_the_detail_costs_the_same_queries_however_long_its_story(
    api_as: Any, resources: dict, django_assert_max_num_queries: Any, events: int
) -> None:
    victim = resources["own_workload"]
    for _ in range(events):
        run_on(victim, "n1", [0, 1, 2, 3])
        do_record_preemption(
            victim,
            reason="reclaim",
            at=timezone.now(),
            gpus_freed=4,
            lost_gpu_hours=1,
            preemptor=resources["other_workload"],
        )
        do_transition_workload(victim, "preempted", reason="reclaimed")
        do_transition_workload(victim, "pending", reason="requeued")
    client = api_as("member")
    with django_assert_max_num_queries(12):
        response = client.get(URL + "nlp/train-1/")
    assert len(response.json()["preemptions"]) == 1 + events  # the pool's node failure too


def occupy(resources: dict, gpus_on: dict[str, list[int]]) -> None:
    """Vision runs one workload per node, on the given GPUs of it."""
    vera = resources["other_workload"].submitter
    for index, (node, gpus) in enumerate(sorted(gpus_on.items())):
        workload = submit(f"vision-{index}", resources["vision"], vera, gpus=len(gpus))
        run_on(workload, node, gpus)


def dry_run(api_as: Any, payload: dict[str, Any]) -> dict[str, Any]:
    before = Workload.objects.count()
    response = api_as("member").post(URL + "dry-run/", payload, format="json")
    assert response.status_code == 200, response.content
    assert Workload.objects.count() == before  # nothing is submitted
    return response.json()


def layers(answer: dict[str, Any]) -> dict[str, bool]:
    return {layer["layer"]: layer["passes"] for layer in answer["layers"]}


def test_a_dry_run_that_fits_names_where_it_would_run(api_as: Any, resources: dict) -> None:
    occupy(resources, {"n1": [0, 1, 2, 3, 4, 5]})
    payload = body()
    del payload["name"]  # the name is optional in a dry-run
    answer = dry_run(api_as, payload)
    assert answer["fits"] is True and answer["first_failure"] is None
    assert layers(answer) == {"quota": True, "capacity": True, "placement": True}
    assert answer["layers"][2]["facts"] == {"nodes": ["n2"]}
    assert answer["workload"].startswith("nlp/dry-run-")
    assert answer["cycle_id"] == resources["cycle"].pk  # the last finished cycle's view


def test_a_dry_run_over_quota_names_the_quota_layer_and_its_numbers(
    api_as: Any, resources: dict
) -> None:
    occupy(resources, {"n2": list(range(8))})
    answer = dry_run(api_as, with_pod_set(count=3))
    assert answer["fits"] is False and answer["first_failure"] == "quota"
    quota = answer["layers"][0]
    assert (quota["facts"]["asked_gpus"], quota["facts"]["available_gpus"]) == (12, 8)
    assert "Queue nlp-train has 8 h100 GPUs of quota available, 12 asked" in quota["detail"]


def test_a_dry_run_says_when_the_work_could_never_run(api_as: Any, resources: dict) -> None:
    """Above every capability on its queue's path, it would be set aside at once (no place in
    line, no estimate): the dry-run said only that the quota layer failed, as for work that
    waits its turn."""
    answer = dry_run(api_as, with_pod_set(count=100))
    assert answer["first_failure"] == "quota"
    assert "can never hold 400 h100 GPUs" in answer["never_fits"]
    occupy(resources, {"n2": list(range(8))})
    assert dry_run(api_as, with_pod_set(count=3))["never_fits"] == ""  # waits its turn


def test_a_dry_run_within_quota_but_beyond_free_gpus_names_capacity(
    api_as: Any, resources: dict
) -> None:
    occupy(resources, {"n1": [0, 1, 2, 3], "n2": list(range(8))})
    answer = dry_run(api_as, with_pod_set(gpus=8))
    assert answer["first_failure"] == "capacity"
    assert layers(answer) == {"quota": True, "capacity": False, "placement": False}
    assert "4 healthy free h100 GPUs, 8 asked" in answer["layers"][1]["detail"]


def test_a_dry_run_with_free_gpus_spread_too_thin_names_placement(
    api_as: Any, resources: dict
) -> None:
    occupy(resources, {"n1": [0, 1, 2, 3], "n2": [0, 1, 2, 3]})
    answer = dry_run(api_as, with_pod_set(gpus=8))
    assert answer["first_failure"] == "placement"
    assert layers(answer) == {"quota": True, "capacity": True, "placement": False}
    assert answer["layers"][2]["facts"]["free_gpus"] == 8


def test_a_dry_run_checks_its_body_like_a_submission(api_as: Any, resources: dict) -> None:
    response = api_as("member").post(URL + "dry-run/", body(queue="vision-train"), format="json")
    assert response.status_code == 400 and "queue" in response.json()["error"]["fields"]
    response = api_as("member").post(URL + "dry-run/", with_pod_set(gpus=-1), format="json")
    assert "pod_sets.0.gpus" in response.json()["error"]["fields"]


def test_a_dry_run_on_a_pool_that_cannot_be_planned_answers_409(
    api_as: Any, resources: dict
) -> None:
    # A state the actions refuse to make (there is always a default class), made directly.
    PriorityClass.objects.filter(name="normal").update(default=False)
    response = api_as("member").post(URL + "dry-run/", body(priority_class="normal"), format="json")
    assert response.status_code == 409
    assert "no default priority class" in response.json()["error"]["message"]


def test_a_summary_whose_sentence_says_the_position_does_not_say_it_again(
    api_as: Any, resources: dict
) -> None:
    """Work behind others: the core's sentence names its position ("position 2 in queue
    nlp-train"); the summary adds no second "Position 2 in queue nlp-train."."""
    ahead = submit("sweep-1", resources["nlp"], resources["own_workload"].submitter, gpus=1)
    explained(ahead, "quota", "Queue nlp-train has no quota left.", queue_rank=1.0)
    explained(
        resources["own_workload"],
        "behind",
        "Higher-ranked work holds the capacity it needs: position 9 in queue nlp-train.",
        {"queue": "nlp-train"},
        queue_rank=2.0,
    )
    summary = api_as("member").get(URL + "nlp/train-1/").json()["explanation"]["summary"]
    assert "position 2 in queue nlp-train" in summary  # rendered again: where it is now
    assert summary.lower().count("position 2") == 1 and "position 9" not in summary


def test_numbers_past_the_fields_bounds_are_refused_in_the_products_words(
    api_as: Any, resources: dict
) -> None:
    """GPUs per pod past the core's bound and a protected runtime past the column's are
    refused with what the bound is, not Django's "Ensure this value is less than or equal to
    64." (the page's field and the CLI say the same words): on h100, whose largest node has
    8, the flavor's rule, as 9 GPUs are; on a flavor with no node yet, the core's bound."""
    response = api_as("member").post(URL, with_pod_set(gpus=99), format="json")
    assert response.json()["error"]["fields"]["pod_sets.0.gpus"] == [
        "99 GPUs per pod, and a pod runs on one node: the largest h100 node has 8"
    ]
    flavor("gb300")  # no node of it yet
    response = api_as("member").post(URL, with_pod_set(gpus=99, flavor="gb300"), format="json")
    assert response.json()["error"]["fields"]["pod_sets.0.gpus"] == [
        f"99 GPUs per pod: {TOO_MANY_GPUS_PER_POD}"
    ]
    response = api_as("member").post(URL, body(protected_runtime_s=2**31), format="json")
    assert response.json()["error"]["fields"]["protected_runtime_s"] == [
        "at most 2147483647 seconds (about 68 years)"
    ]
    assert not Workload.objects.filter(name="bert-large").exists()
