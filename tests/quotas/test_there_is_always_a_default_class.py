"""Workloads that name no priority class get the default one, and every cycle needs it: the
default moves to another class (one write, both audited) but never just goes away."""

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from domain_builders import priority_class, user
from rest_framework.test import APIClient

from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import do_delete_priority_class, do_save_priority_class
from gpupool.quotas.models import PriorityClass

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_api() -> APIClient:
    client = APIClient()
    client.force_authenticate(user("ada", admin=True))
    return client


def change_page(priority_class: PriorityClass) -> str:
    return reverse("admin:quotas_priorityclass_change", args=[priority_class.pk])


def defaults() -> list[str]:
    return list(PriorityClass.objects.filter(default=True).values_list("name", flat=True))


def test_unsetting_the_default_class_is_refused_naming_default(admin_api: APIClient) -> None:
    # given normal, the default, and batch
    priority_class("normal", default=True)
    priority_class("batch", value=-10)
    # when an admin unticks normal's default
    response = admin_api.patch(
        "/api/v1/priority-classes/normal/", {"default": False}, format="json"
    )
    # then it is refused naming the field, and normal is still the default
    assert response.status_code == 400, response.content
    assert "make another class the default" in response.json()["error"]["fields"]["default"][0]
    assert defaults() == ["normal"]


def test_deleting_the_default_class_is_refused_naming_default(admin_api: APIClient) -> None:
    normal = priority_class("normal", default=True)
    response = admin_api.delete("/api/v1/priority-classes/normal/")
    assert response.status_code == 400, response.content
    assert "default" in response.json()["error"]["fields"]
    assert defaults() == ["normal"]
    with pytest.raises(ValidationError) as error:
        do_delete_priority_class(normal, acting_user=None)
    assert "default" in error.value.message_dict


def test_making_another_class_the_default_moves_the_default(admin_api: APIClient) -> None:
    priority_class("normal", default=True)
    priority_class("batch", value=-10)
    response = admin_api.patch("/api/v1/priority-classes/batch/", {"default": True}, format="json")
    assert response.status_code == 200, response.content
    assert defaults() == ["batch"]
    # both classes' changes are in the audit log
    changed = {
        event.object_repr: (event.before["default"], event.after["default"])
        for event in AuditEvent.objects.filter(
            action="quotas.save_priority_class", before__isnull=False
        )
    }
    assert changed == {"normal": (True, False), "batch": (False, True)}


def test_a_new_default_class_takes_the_default_over() -> None:
    priority_class("normal", default=True)
    priority_class("batch", value=-10, default=True)
    assert defaults() == ["batch"]


def test_a_refused_new_default_leaves_the_old_one_default() -> None:
    priority_class("normal", default=True)
    with pytest.raises(ValidationError) as error:
        do_save_priority_class(
            PriorityClass(name="high", value=100, default=True, budget_rate=Decimal(1)),
            acting_user=None,
        )
    assert "budget_rate" in error.value.message_dict
    assert defaults() == ["normal"]


def test_the_admin_page_moves_the_default_and_refuses_unticking_it(
    submit_admin_form: Any,
) -> None:
    normal = priority_class("normal", default=True)
    batch = priority_class("batch", value=-10)
    # unticking the default on its own page is refused
    submit_admin_form(change_page(normal), {"default": False})
    assert defaults() == ["normal"]
    # ticking it on another class moves it
    submit_admin_form(change_page(batch), {"default": True})
    assert defaults() == ["batch"]
