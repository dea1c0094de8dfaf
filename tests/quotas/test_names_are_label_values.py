"""A queue's name is its pods' ``gpupool.io/queue`` label value (DESIGN §4), and a priority
class's name sits beside it in their pod specs: both follow Kubernetes' rule for label values
(letters, digits, '-', '_', '.', starting and ending with a letter or digit, at most 63), on
every path -- the API, the admin site and the actions -- and a refusal names the field."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from domain_builders import user
from rest_framework.test import APIClient

from gpupool.quotas.actions import do_save_priority_class, do_save_queue
from gpupool.quotas.models import PriorityClass, Queue

pytestmark = pytest.mark.django_db

NOT_LABEL_VALUES = ["-q", "q_", "a_", "_x", "q-", ".q", "a b", "x" * 64]
LABEL_VALUES = ["a-b", "a.b", "a_b", "Team_A.eval", "q", "x" * 63]
RULE = "Kubernetes label value"


@pytest.fixture
def api() -> APIClient:
    client = APIClient()
    client.force_authenticate(user("ada", admin=True))
    return client


def refused_fields(response: Any) -> dict[str, Any]:
    assert response.status_code == 400, response.content[:300]
    fields: dict[str, Any] = response.json()["error"]["fields"]
    return fields


@pytest.mark.parametrize("name", NOT_LABEL_VALUES)
def test_the_api_refuses_a_queue_name_that_is_no_label_value(api: APIClient, name: str) -> None:
    fields = refused_fields(api.post("/api/v1/queues/", {"name": name}, format="json"))
    assert list(fields) == ["name"]
    assert RULE in " ".join(fields["name"])
    assert not Queue.objects.exists()


@pytest.mark.parametrize("name", LABEL_VALUES)
def test_the_api_accepts_a_queue_name_that_is_a_label_value(api: APIClient, name: str) -> None:
    response = api.post("/api/v1/queues/", {"name": name}, format="json")
    assert response.status_code == 201, response.content[:300]
    assert response.json()["name"] == name
    assert Queue.objects.get().name == name


@pytest.mark.parametrize("name", ["-q", "q_", "a_"])
def test_the_api_refuses_a_priority_class_name_that_is_no_label_value(
    api: APIClient, name: str
) -> None:
    answer = api.post("/api/v1/priority-classes/", {"name": name, "value": 1}, format="json")
    fields = refused_fields(answer)
    assert list(fields) == ["name"] and RULE in " ".join(fields["name"])
    assert not PriorityClass.objects.filter(value=1).exists()


@pytest.mark.parametrize("name", ["a-b", "a.b", "a_b"])
def test_the_api_accepts_a_priority_class_name_that_is_a_label_value(
    api: APIClient, name: str
) -> None:
    answer = api.post("/api/v1/priority-classes/", {"name": name, "value": 1}, format="json")
    assert answer.status_code == 201, answer.content[:300]
    assert PriorityClass.objects.get(value=1).name == name


@pytest.mark.parametrize("name", ["-q", "q_", "a_"])
def test_the_admin_refuses_a_queue_name_that_is_no_label_value(
    submit_admin_form: Any, name: str
) -> None:
    response = submit_admin_form(reverse("admin:quotas_queue_add"), {"name": name})
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["name"] and RULE in " ".join(errors["name"])
    assert RULE in response.content.decode()
    assert not Queue.objects.exists()


@pytest.mark.parametrize("name", ["a-b", "a.b", "a_b"])
def test_the_admin_accepts_a_queue_name_that_is_a_label_value(
    submit_admin_form: Any, name: str
) -> None:
    response = submit_admin_form(reverse("admin:quotas_queue_add"), {"name": name})
    assert response.status_code == 302
    assert Queue.objects.get().name == name


@pytest.mark.parametrize("name", ["-q", "q_", "a_"])
def test_the_actions_refuse_a_name_that_is_no_label_value(name: str) -> None:
    with pytest.raises(ValidationError) as queue_error:
        do_save_queue(Queue(name=name), acting_user=None)
    assert RULE in " ".join(queue_error.value.message_dict["name"])
    with pytest.raises(ValidationError) as class_error:
        do_save_priority_class(PriorityClass(name=name, value=1), acting_user=None)
    assert RULE in " ".join(class_error.value.message_dict["name"])
    assert not Queue.objects.exists()
    assert not PriorityClass.objects.filter(value=1).exists()


@pytest.mark.parametrize(
    ("collection", "body"),
    [("queues", {"name": "a.b"}), ("priority-classes", {"name": "p.q", "value": 1})],
)
def test_a_dotted_name_is_read_by_its_name_not_taken_for_a_format(
    api: APIClient, collection: str, body: dict[str, Any]
) -> None:
    """The API's name pattern (``lookup_value_regex``) takes what the validator takes: the
    dot in ``a.b`` is part of the name, not a format suffix (it answered 406)."""
    created = api.post(f"/api/v1/{collection}/", body, format="json")
    assert created.status_code == 201, created.content[:300]
    read = api.get(f"/api/v1/{collection}/{body['name']}/")
    assert read.status_code == 200, read.content[:300]
    assert read.json()["name"] == body["name"]
