"""Every way the admin can change a domain model runs an action: the structure of every
registered admin is checked, and the change paths of queues, classes, budgets, workloads and
the history models are exercised through the test client (inventory and tenancy have their
own admin tests)."""

from datetime import date
from typing import Any

import pytest
from django.contrib import admin
from django.test import Client, RequestFactory
from django.urls import reverse
from domain_builders import DOMAIN_APPS, flavor, node, priority_class, queue, quota, tenant, user

from gpupool.accounting.actions import do_open_usage
from gpupool.audit.models import AuditEvent
from gpupool.control.actions import do_start_cycle
from gpupool.quotas.actions import do_create_quota_request, do_grant_budget
from gpupool.quotas.models import PriorityBudget, PriorityClass, Queue, QueueQuota, QuotaRequest
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


def overrides(admin_class: type, method: str) -> bool:
    """Whether ``admin_class`` replaces Django's own ``method`` (which writes directly)."""
    return getattr(admin_class, method) is not getattr(admin.ModelAdmin, method)


def test_every_admin_write_path_of_a_domain_model_is_routed_or_closed(rf: RequestFactory) -> None:
    """Django's own save_model, delete_model, delete_queryset and save_formset write rows
    directly; each domain admin either replaces them (with actions) or denies the permission."""
    request = rf.get("/admin/")
    request.user = user("root-admin", admin=True)
    request.user.is_superuser = request.user.is_staff = True
    problems = []
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label not in DOMAIN_APPS:
            continue
        kind = type(model_admin)
        name = kind.__name__
        writes = model_admin.has_add_permission(request) or model_admin.has_change_permission(
            request
        )
        if writes and not overrides(kind, "save_model"):
            problems.append(f"{name} saves with Django's save_model")
        if model_admin.has_delete_permission(request):
            problems.extend(
                f"{name} deletes with Django's {method}"
                for method in ("delete_model", "delete_queryset")
                if not overrides(kind, method)
            )
        for inline_class in model_admin.get_inlines(request, model()):
            inline = inline_class(model, admin.site)
            inline_writes = (
                inline.has_add_permission(request, model())
                or inline.has_change_permission(request, model())
                or (inline.can_delete and inline.has_delete_permission(request, model()))
            )
            if inline_writes and not overrides(kind, "save_formset"):
                problems.append(f"{name}'s {inline_class.__name__} saves with Django's formset")
    assert not problems


@pytest.fixture
def pool() -> dict[str, Any]:
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    normal = priority_class("normal", default=True)
    team = tenant("nlp", lead=user("lead"))
    root = queue("root")
    return {
        "h100": h100,
        "normal": normal,
        "team": team,
        "root": root,
        "nlp": queue(
            "nlp", parent=queue("research", parent=queue("org", parent=root)), tenant=team
        ),
    }


def recorded(action: str) -> list[str]:
    """The actors of one action's audit rows, oldest first."""
    return list(AuditEvent.objects.filter(action=action).order_by("id").values_list("actor_name"))


def test_a_queue_and_its_inline_quota_are_saved_and_deleted_through_actions(
    admin_client: Client, submit_admin_form: Any, pool: dict
) -> None:
    response = submit_admin_form(
        reverse("admin:quotas_queue_add"), {"name": "vision", "parent": pool["root"].pk}
    )
    assert response.status_code == 302
    vision = Queue.objects.get(name="vision")
    change = reverse("admin:quotas_queue_change", args=[vision.pk])
    response = submit_admin_form(
        change,
        {
            "weight": "2",
            "quotas-0-flavor": pool["h100"].pk,
            "quotas-0-guarantee": "1",
            "quotas-0-deserved": "2",
            "quotas-0-capability": "4",
        },
    )
    assert response.status_code == 302
    assert QueueQuota.objects.get(queue=vision).capability == 4
    delete = reverse("admin:quotas_queue_delete", args=[vision.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not Queue.objects.filter(name="vision").exists()
    assert recorded("quotas.save_queue")[-2:] == [("root-admin",), ("root-admin",)]
    assert recorded("quotas.set_queue_quota") == [("root-admin",)]
    assert recorded("quotas.delete_queue_quota") == [("root-admin",)]
    assert recorded("quotas.delete_queue") == [("root-admin",)]


def test_a_priority_class_is_added_changed_and_deleted_through_actions(
    admin_client: Client, submit_admin_form: Any, pool: dict
) -> None:
    response = submit_admin_form(
        reverse("admin:quotas_priorityclass_add"),
        {"name": "high", "value": "100", "budget_rate": "1"},
    )
    assert response.status_code == 302
    high = PriorityClass.objects.get(name="high")
    change = reverse("admin:quotas_priorityclass_change", args=[high.pk])
    assert submit_admin_form(change, {"value": "90"}).status_code == 302
    delete = reverse("admin:quotas_priorityclass_delete", args=[high.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not PriorityClass.objects.filter(name="high").exists()
    assert recorded("quotas.save_priority_class")[-2:] == [("root-admin",), ("root-admin",)]
    assert recorded("quotas.delete_priority_class") == [("root-admin",)]


def test_a_budget_set_in_the_admin_is_a_ledger_grant(submit_admin_form: Any, pool: dict) -> None:
    high = priority_class("high", value=100, budget_rate=1)
    response = submit_admin_form(
        reverse("admin:quotas_prioritybudget_add"),
        {
            "tenant": pool["team"].pk,
            "priority_class": high.pk,
            "period_start": "2026-12-01",
            "period_end": "2027-01-01",
            "gpu_hours": "100",
        },
    )
    assert response.status_code == 302
    budget = PriorityBudget.objects.get()
    change = reverse("admin:quotas_prioritybudget_change", args=[budget.pk])
    assert submit_admin_form(change, {"gpu_hours": "150"}).status_code == 302
    assert list(budget.entries.values_list("kind", "gpu_hours")) == [
        ("grant", 100),
        ("grant", 50),
    ]
    assert recorded("quotas.grant_budget") == [("root-admin",), ("root-admin",)]


def test_pending_workloads_are_cancelled_from_the_list_through_the_state_machine(
    admin_client: Client, pool: dict
) -> None:
    quota(pool["nlp"], pool["h100"], 0, 8, 8)
    workload = do_submit_workload(
        "train", queue=pool["nlp"], pod_sets=[PodSetSpec(1, gpus=1, flavor=pool["h100"])]
    )
    url = reverse("admin:workloads_workload_changelist")
    response = admin_client.post(
        url, {"action": "cancel_pending", "_selected_action": [workload.pk]}, follow=True
    )
    assert "1 workload cancelled" in response.content.decode()
    workload.refresh_from_db()
    assert workload.state == "cancelled"
    transition = workload.transitions.order_by("id").last()
    assert transition is not None and transition.actor is not None
    assert transition.actor.username == "root-admin"


@pytest.mark.parametrize(
    "model",
    [
        "workloads.workload",
        "control.schedulingcycle",
        "quotas.quotarequest",
        "quotas.prioritybudget",
        "quotas.budgetledgerentry",
        "accounting.usageinterval",
        "audit.auditevent",
    ],
)
def test_history_is_not_deleted_in_the_admin(admin_client: Client, pool: dict, model: str) -> None:
    quota(pool["nlp"], pool["h100"], 0, 8, 8)
    workload = do_submit_workload(
        "train", queue=pool["nlp"], pod_sets=[PodSetSpec(1, gpus=1, flavor=pool["h100"])]
    )
    do_start_cycle(at=workload.submitted_at)
    do_open_usage(workload, flavor=pool["h100"], gpus=1, at=workload.submitted_at)
    do_create_quota_request(
        kind="queue-quota",
        tenant=pool["team"],
        requested_by=pool["team"].memberships.get().user,
        justification="more",
        payload={"guarantee": 0, "deserved": 8, "capability": 16},
        queue=pool["nlp"],
        flavor=pool["h100"],
    )
    high = priority_class("high", value=100, budget_rate=1)
    do_grant_budget(
        pool["team"],
        high,
        period_start=date(2026, 12, 1),
        period_end=date(2027, 1, 1),
        gpu_hours=10,
        acting_user=None,
    )
    app_label, model_name = model.split(".")
    row = admin.site._registry[
        next(m for m in admin.site._registry if m._meta.label_lower == model)
    ].model.objects.first()
    assert row is not None
    url = reverse(f"admin:{app_label}_{model_name}_delete", args=[row.pk])
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    assert type(row).objects.filter(pk=row.pk).exists()
    assert Workload.objects.exists()


def test_a_quota_request_is_drafted_and_submitted_from_the_admin(
    admin_client: Client, submit_admin_form: Any, pool: dict
) -> None:
    response = submit_admin_form(
        reverse("admin:quotas_quotarequest_add"),
        {
            "kind": "queue-quota",
            "tenant": pool["team"].pk,
            "queue": pool["nlp"].pk,
            "flavor": pool["h100"].pk,
            "payload": '{"guarantee": 0, "deserved": 2, "capability": 4}',
            "justification": "evaluation sweeps",
        },
    )
    assert response.status_code == 302
    request = QuotaRequest.objects.get()
    assert (request.state, request.requested_by.username) == ("draft", "root-admin")
    url = reverse("admin:quotas_quotarequest_change", args=[request.pk])
    assert admin_client.post(url, {"_submit_request": "1"}).status_code == 302
    request.refresh_from_db()
    assert request.state == "submitted"
    assert recorded("quotas.create_quota_request") == [("root-admin",)]
    assert recorded("quotas.submit_quota_request") == [("root-admin",)]
