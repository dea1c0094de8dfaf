"""The audit log through the API (``/api/v1/audit-events/``): what the Audit page shows, to
admins, filtered the same way, and as CSV."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from domain_builders import flavor, node, queue, quota, user
from rest_framework.test import APIClient

from gpupool.quotas.actions import do_set_queue_quota

pytestmark = pytest.mark.django_db
URL = "/api/v1/audit-events/"
GUARANTEES = ("2.000", "4.000")  # as the audit stores decimals


@pytest.fixture
def changed() -> dict[str, Any]:
    """An admin's quota change beside the system's (the builders act as nobody)."""
    admin = user("ada", admin=True)
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    team = queue("team", parent=queue("root"))
    quota(team, h100, 2, 4, 8)
    do_set_queue_quota(
        team, h100, guarantee=4, deserved=4, capability=8, acting_user=admin, reason="more"
    )
    client = APIClient()
    client.force_authenticate(admin)
    return {"admin": admin, "client": client}


def test_an_admin_reads_who_changed_what_in_words(changed: dict[str, Any]) -> None:
    answer = changed["client"].get(URL, {"actor": "ada"})
    assert answer.status_code == 200
    (event,) = answer.json()["results"]
    assert event["actor"] == "ada" and event["action"] == "quotas.set_queue_quota"
    assert event["action_label"] and event["action_label"] != event["action"]
    assert event["object_type"] == "quotas.queuequota" and event["object_kind"]
    assert event["changed_fields"] == ["guarantee"]
    assert (event["before"]["guarantee"], event["after"]["guarantee"]) == GUARANTEES
    assert event["reason"] == "more"
    detail = changed["client"].get(f"{URL}{event['id']}/")
    assert detail.status_code == 200 and detail.json() == event


def test_filters_split_people_from_the_system(changed: dict[str, Any]) -> None:
    client = changed["client"]
    people = client.get(URL, {"made_by": "people"}).json()["results"]
    system = client.get(URL, {"made_by": "system"}).json()["results"]
    assert {e["actor"] for e in people} == {"ada"}
    assert system and {e["actor"] for e in system} == {"system"}
    assert client.get(URL, {"actor": "system"}).json()["count"] == len(system)
    refused = client.get(URL, {"made_by": "robots"})
    assert refused.status_code == 400 and "made_by" in refused.json()["error"]["fields"]
    assert client.get(URL, {"until": "2000-01-01T00:00:00Z"}).json()["count"] == 0


def test_the_csv_carries_every_event_with_json_text(changed: dict[str, Any]) -> None:
    answer = changed["client"].get(URL, {"format": "csv", "made_by": "people"})
    assert answer.status_code == 200
    assert 'filename="audit-events.csv"' in answer["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))
    (row,) = rows
    assert row["actor"] == "ada" and row["changed_fields"] == "guarantee"
    assert row["after"].startswith("{") and '"guarantee"' in row["after"]


def test_only_admins_read_the_log(changed: dict[str, Any]) -> None:
    client = APIClient()
    client.force_authenticate(user("lee"))
    assert client.get(URL).status_code == 403
