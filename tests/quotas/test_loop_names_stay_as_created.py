"""Queues and priority classes keep the names they were created with: the scheduling loop,
pods' gpupool.io labels and URLs address them by name, so a rename is refused (400 naming
``name``) and nothing changes; sending the same name again is fine."""

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from domain_builders import priority_class, queue, user
from rest_framework.test import APIClient

from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import do_save_queue
from gpupool.quotas.models import PriorityClass, Queue

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_api() -> APIClient:
    client = APIClient()
    client.force_authenticate(user("ada", admin=True))
    return client


def refused_field(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.content
    return response.json()["error"]["fields"]


def test_renaming_a_queue_through_the_api_is_refused_naming_name(admin_api: APIClient) -> None:
    # given the leaf queue recsys under the root
    queue("recsys", parent=queue("root"))
    # when an admin renames it
    response = admin_api.patch("/api/v1/queues/recsys/", {"name": "recsys2"}, format="json")
    # then it is refused naming the field, and the queue keeps its name (no audit row)
    assert "cannot be changed" in refused_field(response)["name"][0]
    assert list(Queue.objects.values_list("name", flat=True)) == ["recsys", "root"]
    assert not AuditEvent.objects.filter(action="quotas.save_queue", before__isnull=False)


def test_renaming_a_queue_through_its_action_is_refused() -> None:
    team = queue("recsys")
    team.name = "recsys2"
    with pytest.raises(ValidationError) as error:
        do_save_queue(team, acting_user=None)
    assert "name" in error.value.message_dict


def test_a_queue_change_that_repeats_its_name_is_accepted(admin_api: APIClient) -> None:
    queue("recsys", parent=queue("root"))
    response = admin_api.patch(
        "/api/v1/queues/recsys/", {"name": "recsys", "weight": "2"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert Queue.objects.get(name="recsys").weight == 2


def test_renaming_a_priority_class_is_refused_naming_name(admin_api: APIClient) -> None:
    priority_class("normal", default=True)
    response = admin_api.patch(
        "/api/v1/priority-classes/normal/", {"name": "standard"}, format="json"
    )
    assert "cannot be changed" in refused_field(response)["name"][0]
    assert list(PriorityClass.objects.values_list("name", flat=True)) == ["normal"]
