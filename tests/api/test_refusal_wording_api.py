"""The API's refusals say what is wrong and what is allowed, naming the field: cancelling work
that has ended says so and its state (not the state machine's "it can move to nothing"),
adding a member twice says the user already belongs (not DRF's "must make a unique set"),
and a workload name that is no DNS label says what a DNS label is."""

from __future__ import annotations

from typing import Any

import pytest
from resources_pool import pool

from gpupool.audit.models import AuditEvent
from gpupool.tenancy.models import Membership
from gpupool.workloads.models import Workload, WorkloadTransition

pytestmark = pytest.mark.django_db

WORKLOADS = "/api/v1/workloads/"
MEMBERSHIPS = "/api/v1/memberships/"
DNS_LABEL_RULE = (
    "Enter a DNS label (RFC 1123): 1 to 63 characters, each a lower-case letter a-z, a digit "
    "0-9 or '-', starting and ending with a letter or digit."
)


def test_cancelling_ended_work_twice_says_it_has_ended_and_changes_nothing(
    api_as: Any, world: Any
) -> None:
    pool(world)
    assert api_as("lead").post(WORKLOADS + "nlp/train-1/cancel/").status_code == 200
    moves = WorkloadTransition.objects.count()
    again = api_as("lead").post(WORKLOADS + "nlp/train-1/cancel/")
    assert again.status_code == 400
    assert again.json()["error"]["fields"] == {
        "state": ["nlp/train-1 has already ended: it is cancelled. Nothing was changed."]
    }
    assert WorkloadTransition.objects.count() == moves


def test_adding_a_member_twice_says_the_user_already_belongs(api_as: Any, world: Any) -> None:
    existing = Membership.objects.get(user__username="max", tenant__name="nlp")
    events = AuditEvent.objects.count()
    response = api_as("lead").post(
        MEMBERSHIPS, {"user": "max", "tenant": "nlp", "role": "lead"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {
        "user": [
            f"max is already a member of nlp (role member); to change the role, PATCH "
            f"memberships/{existing.pk}/"
        ]
    }
    assert "unique set" not in response.content.decode()
    existing.refresh_from_db()
    assert existing.role == "member" and AuditEvent.objects.count() == events


@pytest.mark.parametrize(
    "name",
    ["Bert_Large", "-bert", "bert-", "b" * 64],
    ids=["upper case and underscore", "leading dash", "trailing dash", "64 characters"],
)
def test_a_name_that_is_no_dns_label_says_what_a_dns_label_is(
    api_as: Any, world: Any, name: str
) -> None:
    pool(world)
    body = {
        "name": name,
        "queue": "nlp-train",
        "pod_sets": [{"count": 1, "gpus": 1, "flavor": "h100", "image": "pytorch"}],
    }
    response = api_as("member").post(WORKLOADS, body, format="json")
    assert response.status_code == 400
    assert DNS_LABEL_RULE in response.json()["error"]["fields"]["name"]
    assert not Workload.objects.filter(name=name).exists()


def test_a_dns_label_of_63_characters_is_a_name(api_as: Any, world: Any) -> None:
    pool(world)
    name = "a" + "-" * 61 + "9"
    body = {
        "name": name,
        "queue": "nlp-train",
        "pod_sets": [{"count": 1, "gpus": 1, "flavor": "h100", "image": "pytorch"}],
    }
    response = api_as("member").post(WORKLOADS, body, format="json")
    assert response.status_code == 201, response.content
