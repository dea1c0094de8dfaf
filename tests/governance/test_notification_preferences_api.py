"""``/api/v1/notification-preferences/``: every user reads and changes their own
preferences, kind by kind; nobody else's."""

from __future__ import annotations

from typing import Any

import pytest

from gpupool.audit.models import AuditEvent
from gpupool.notifications.models import NotificationPreference

pytestmark = pytest.mark.django_db

URL = "/api/v1/notification-preferences/"


def test_every_kind_is_on_until_turned_off(api_as: Any) -> None:
    listed = api_as("max").get(URL)
    assert listed.status_code == 200
    kinds = {row["kind"]: row["enabled"] for row in listed.json()}
    assert kinds == {
        "request-submitted": True,
        "request-decided": True,
        "request-applied": True,
        "workload-started": True,
        "workload-preempted": True,
        "workload-failed": True,
        "workload-idle": True,
    }


def test_a_user_turns_a_kind_off_and_on_again_audited(pool: Any, api_as: Any) -> None:
    client = api_as("max")
    off = client.patch(f"{URL}workload-started/", {"enabled": False}, format="json")
    assert off.status_code == 200 and off.json()["enabled"] is False
    assert client.get(f"{URL}workload-started/").json()["enabled"] is False
    client.patch(f"{URL}workload-started/", {"enabled": True}, format="json")
    assert client.get(f"{URL}workload-started/").json()["enabled"] is True
    rows = AuditEvent.objects.filter(action="notifications.set_preference").order_by("id")
    assert [(row.actor_name, row.after["enabled"]) for row in rows] == [
        ("max", False),
        ("max", True),
    ]


def test_one_user_s_choice_does_not_change_another_s(pool: Any, api_as: Any) -> None:
    api_as("max").patch(f"{URL}workload-failed/", {"enabled": False}, format="json")
    assert api_as("lena").get(f"{URL}workload-failed/").json()["enabled"] is True
    assert NotificationPreference.objects.get().user == pool.users["max"]


def test_a_change_without_enabled_answers_400_naming_it(api_as: Any) -> None:
    response = api_as("max").patch(f"{URL}workload-failed/", {}, format="json")
    assert response.status_code == 400
    assert "enabled" in response.json()["error"]["fields"]


def test_an_unknown_kind_answers_404(api_as: Any) -> None:
    assert api_as("max").get(f"{URL}birthday/").status_code == 404
    assert api_as("max").patch(f"{URL}birthday/", {"enabled": False}).status_code == 404
