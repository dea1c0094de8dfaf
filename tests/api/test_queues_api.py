"""Queues as a tree with what each holds, borrows and lends now; priority classes; budgets with
their ledger -- read by the roles the design gives them, changed by admins through the actions."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from csv_exports import downloaded, paged_as_csv
from django.utils import timezone
from domain_builders import queue
from resources_pool import pool, submit

from gpupool.audit.models import AuditEvent
from gpupool.inventory.models import Node
from gpupool.quotas.actions import do_reserve_budget, do_spend_budget
from gpupool.quotas.models import PriorityClass, Queue, QueueQuota
from gpupool.workloads.actions import PlacementSpec, do_transition_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    return pool(world)


def run(resources: dict, name: str, node: str, gpus: list[int]) -> None:
    """Vision runs a workload of ``len(gpus)`` GPUs on ``node``, started an hour ago."""
    workload = submit(name, resources["vision"], resources["other_workload"].submitter, len(gpus))
    start = timezone.now() - timedelta(hours=1)
    placement = PlacementSpec("main", 0, Node.objects.get(name=node), gpus)
    do_transition_workload(workload, "admitted", reason="fits", at=start, placements=[placement])
    do_transition_workload(workload, "running", reason="started", at=start)


def by_name(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.content
    return {queue["name"]: queue for queue in response.json()["results"]}


def h100(queue: dict[str, Any]) -> dict[str, Any]:
    return next(row for row in queue["quotas"] if row["flavor"] == "h100")


def test_every_role_sees_the_tree_with_what_each_queue_holds_borrows_and_lends(
    api_as: Any, resources: dict
) -> None:
    run(resources, "big", "n2", list(range(8)))
    run(resources, "extra", "n1", [0, 1, 2, 3])
    queues = by_name(api_as("finance").get("/api/v1/queues/"))
    assert queues["root"]["children"] == ["nlp-train", "vision-train"]
    assert queues["root"]["leaf"] is False and queues["root"]["parent"] is None
    nlp, vision = queues["nlp-train"], queues["vision-train"]
    assert (nlp["parent"], nlp["tenant"], nlp["leaf"]) == ("root", "nlp", True)
    # 16 GPUs deserved by two teams of 8 on a pool of 16: vision's 4 above its share are nlp's.
    assert h100(vision) | {"flavor": "h100"} == {
        "flavor": "h100",
        "guarantee": "0.000",
        "deserved": "8.000",
        "capability": "16.000",
        "allocated": "12.000",
        "borrowed": "4.000",
        "lent": "0.000",
    }
    assert (h100(nlp)["allocated"], h100(nlp)["borrowed"], h100(nlp)["lent"]) == (
        "0.000",
        "0.000",
        "4.000",
    )
    assert h100(queues["root"])["allocated"] == "12.000"
    assert h100(queues["root"])["deserved"] is None  # the root stands for the pool
    assert (vision["placed_workloads"], vision["pending_workloads"]) == (2, 1)
    assert vision["usage_cycle"] == resources["cycle"].pk
    assert by_name(api_as("member").get("/api/v1/queues/?leaf=true")).keys() == {
        "nlp-train",
        "vision-train",
    }
    assert by_name(api_as("member").get("/api/v1/queues/?tenant=vision")).keys() == {"vision-train"}


def test_usage_is_left_out_not_failed_when_the_pool_cannot_be_planned(
    api_as: Any, resources: dict
) -> None:
    PriorityClass.objects.filter(name="normal").update(default=False)
    nlp = api_as("member").get("/api/v1/queues/nlp-train/").json()
    assert h100(nlp)["deserved"] == "8.000" and h100(nlp)["allocated"] is None


def test_admins_change_queues_and_quotas_through_the_audited_actions(
    api_as: Any, resources: dict
) -> None:
    admin = api_as("admin")
    made = admin.post(
        "/api/v1/queues/",
        {"name": "nlp-eval", "parent": "root", "tenant": "nlp", "weight": "2"},
        format="json",
    )
    assert made.status_code == 201, made.content
    assert made.json()["weight"] == "2.000" and made.json()["leaf"] is True
    quota = admin.put(
        "/api/v1/queues/nlp-eval/quotas/h100/",
        {"guarantee": 0, "deserved": 0, "capability": 4, "reason": "evals"},
        format="json",
    )
    assert quota.status_code == 200, quota.content
    assert h100(quota.json())["capability"] == "4.000"
    changed = admin.patch("/api/v1/queues/nlp-eval/", {"reclaimable": False}, format="json")
    assert changed.json()["reclaimable"] is False
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"quotas.save_queue", "quotas.set_queue_quota"} <= actions
    assert admin.delete("/api/v1/queues/nlp-eval/quotas/h100/").status_code == 204
    assert admin.delete("/api/v1/queues/nlp-eval/").status_code == 204
    assert not Queue.objects.filter(name="nlp-eval").exists()


@pytest.mark.parametrize(
    ("levels", "field"),
    [
        ({"guarantee": 9, "deserved": 8, "capability": 16}, "guarantee"),
        ({"guarantee": 0, "deserved": 20, "capability": 16}, "deserved"),
        ({"guarantee": 17, "deserved": 17, "capability": 17}, "guarantee"),
        ({"guarantee": -1, "deserved": 8, "capability": 16}, "guarantee"),
    ],
    ids=["guarantee above deserved", "deserved above capability",
         "guarantee beyond the pool's healthy GPUs", "a negative guarantee"],
)  # fmt: skip
def test_a_quota_that_breaks_a_tree_rule_answers_400_naming_the_level(
    api_as: Any, resources: dict, levels: dict, field: str
) -> None:
    response = api_as("admin").put("/api/v1/queues/nlp-train/quotas/h100/", levels, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert QueueQuota.objects.get(queue__name="nlp-train").deserved == Decimal(8)


def test_a_queue_with_workloads_is_not_deleted(api_as: Any, resources: dict) -> None:
    response = api_as("admin").delete("/api/v1/queues/nlp-train/")
    assert response.status_code == 400 and "queue" in response.json()["error"]["fields"]


def test_every_role_reads_the_priority_classes_and_admins_keep_one_default(
    api_as: Any, resources: dict
) -> None:
    listed = api_as("member").get("/api/v1/priority-classes/").json()["results"]
    assert [(c["name"], c["value"], c["default"]) for c in listed] == [
        ("urgent", 100, False),
        ("normal", 0, True),
    ]
    # the default is never just dropped; a new default class takes it over
    dropped = api_as("admin").patch(
        "/api/v1/priority-classes/normal/", {"default": False}, format="json"
    )
    assert dropped.status_code == 400 and "default" in dropped.json()["error"]["fields"]
    second = api_as("admin").post(
        "/api/v1/priority-classes/", {"name": "also", "value": 1, "default": True}, format="json"
    )
    assert second.status_code == 201 and second.json()["default"] is True
    assert list(PriorityClass.objects.filter(default=True).values_list("name", flat=True)) == [
        "also"
    ]
    made = api_as("admin").post(
        "/api/v1/priority-classes/", {"name": "batch", "value": -10}, format="json"
    )
    assert made.status_code == 201 and made.json()["preemption_policy"] == "PreemptLowerPriority"


def test_a_tenant_reads_its_budgets_and_their_ledger_and_finance_reads_all(
    api_as: Any, resources: dict
) -> None:
    budget = resources["budgets"]["nlp"]
    now = timezone.now()
    do_reserve_budget(budget, gpu_hours=10, workload=resources["own_workload"], at=now)
    do_spend_budget(budget, gpu_hours=5, workload=resources["own_workload"], at=now)
    mine = api_as("member").get("/api/v1/budgets/").json()["results"]
    assert [(b["tenant"], b["priority_class"]) for b in mine] == [("nlp", "urgent")]
    assert (
        mine[0]["gpu_hours"],
        mine[0]["remaining_gpu_hours"],
        mine[0]["spent_gpu_hours"],
        mine[0]["reserved_gpu_hours"],
    ) == ("100.000", "85.0000", "5.0000", "10.0000")
    ledger = api_as("lead").get(f"/api/v1/budgets/{budget.pk}/ledger/").json()["results"]
    assert [(e["kind"], e["gpu_hours"], e["workload"]) for e in ledger] == [
        ("grant", "100.0000", None),
        ("reserve", "-10.0000", "nlp/train-1"),
        ("spend", "-5.0000", "nlp/train-1"),
    ]
    assert len(api_as("finance").get("/api/v1/budgets/").json()["results"]) == 2
    other = resources["budgets"]["vision"].pk
    assert api_as("member").get(f"/api/v1/budgets/{other}/ledger/").status_code == 404


def test_budgets_download_as_csv_as_each_role_reads_them(api_as: Any, resources: dict) -> None:
    do_spend_budget(
        resources["budgets"]["nlp"],
        gpu_hours=5,
        workload=resources["own_workload"],
        at=timezone.now(),
    )
    for role, tenants in (("member", ["nlp"]), ("finance", ["nlp", "vision"])):
        client = api_as(role)
        rows = downloaded(client, "/api/v1/budgets/?ordering=tenant__name", "budgets")
        assert rows == paged_as_csv(client, "/api/v1/budgets/?ordering=tenant__name")
        assert [row["tenant"] for row in rows] == tenants
    assert rows[0]["spent_gpu_hours"] == "5.0000"


def test_the_budgets_csv_says_the_periods_last_day_beside_its_end(
    api_as: Any, resources: dict
) -> None:
    """``period_end`` is the first day after the period, as the model stores it and the JSON
    says it; the pages show the last day, included, and so does ``period_last_day``, in the
    JSON and in the CSV finance reads."""
    budget = resources["budgets"]["nlp"]
    last = budget.period_end - timedelta(days=1)
    client = api_as("finance")
    [row] = downloaded(client, "/api/v1/budgets/?tenant=nlp", "budgets")
    assert list(row)[3:6] == ["period_start", "period_end", "period_last_day"]
    assert (row["period_start"], row["period_end"], row["period_last_day"]) == (
        budget.period_start.isoformat(),
        budget.period_end.isoformat(),
        last.isoformat(),
    )
    assert last.isoformat() in budget.period_text() and last.month == budget.period_start.month
    [listed] = client.get("/api/v1/budgets/?tenant=nlp").json()["results"]
    assert (listed["period_end"], listed["period_last_day"]) == (
        budget.period_end.isoformat(),
        last.isoformat(),
    )


def test_an_admin_grants_a_budget_through_the_ledger(api_as: Any, resources: dict) -> None:
    budget = resources["budgets"]["nlp"]
    response = api_as("admin").post(
        "/api/v1/budgets/",
        {
            "tenant": "nlp",
            "priority_class": "urgent",
            "period_start": budget.period_start.isoformat(),
            "period_end": budget.period_end.isoformat(),
            "gpu_hours": "150",
            "reason": "paper deadline",
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["remaining_gpu_hours"] == "150.0000"
    assert list(budget.entries.values_list("kind", "gpu_hours")) == [
        ("grant", Decimal(100)),
        ("grant", Decimal(50)),
    ]
    refused = api_as("admin").post(
        "/api/v1/budgets/",
        {
            "tenant": "nlp",
            "priority_class": "normal",
            "period_start": "2027-01-01",
            "period_end": "2027-02-01",
            "gpu_hours": 1,
        },
        format="json",
    )
    assert refused.status_code == 400 and "priority_class" in refused.json()["error"]["fields"]


@pytest.mark.parametrize("extra", [0, 10])
def test_the_queue_list_costs_the_same_queries_however_many_queues(
    api_as: Any, resources: dict, django_assert_max_num_queries: Any, extra: int
) -> None:
    for index in range(extra):
        queue(f"team-{index}", parent=resources["root"])
    client = api_as("member")
    client.get("/api/v1/queues/")  # the pool's figures are computed once per cycle
    with django_assert_max_num_queries(8):
        response = client.get("/api/v1/queues/")
    assert response.json()["count"] == 3 + extra


@pytest.mark.parametrize("extra", [0, 8])
def test_the_class_budget_and_ledger_lists_cost_the_same_queries_however_long(
    api_as: Any, resources: dict, django_assert_max_num_queries: Any, extra: int
) -> None:
    budget = resources["budgets"]["nlp"]
    for _ in range(extra):
        do_spend_budget(budget, gpu_hours=1, workload=resources["own_workload"], at=timezone.now())
    client = api_as("finance")
    for url in ("/api/v1/priority-classes/", "/api/v1/budgets/"):
        with django_assert_max_num_queries(5):
            assert client.get(url).status_code == 200
    with django_assert_max_num_queries(7):
        ledger = client.get(f"/api/v1/budgets/{budget.pk}/ledger/")
    assert ledger.json()["count"] == 1 + extra
