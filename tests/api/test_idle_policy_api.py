"""The idle policy in the API: priority classes and queues carry ``idle_alert_after_s`` and
``idle_reclaim_after_s`` (null: never for a class, the class's for a queue); admins set them,
and a bad value answers 400 naming the field and changes nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from resources_pool import pool

from gpupool.audit.models import AuditEvent
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.utilization.actions import do_record_activity

pytestmark = pytest.mark.django_db


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    return pool(world)


def test_an_admin_sets_a_class_idle_policy_and_everyone_reads_it(
    api_as: Any, resources: dict
) -> None:
    changed = api_as("admin").patch(
        "/api/v1/priority-classes/normal/",
        {"idle_alert_after_s": 1200, "idle_reclaim_after_s": 3600},
        format="json",
    )
    assert changed.status_code == 200, changed.content
    listed = api_as("member").get("/api/v1/priority-classes/").json()["results"]
    policy = {c["name"]: (c["idle_alert_after_s"], c["idle_reclaim_after_s"]) for c in listed}
    assert policy == {"normal": (1200, 3600), "urgent": (None, None)}
    assert AuditEvent.objects.filter(action="quotas.save_priority_class").exists()


def test_a_queue_overrides_the_reclaim_timeout_of_its_workloads_class(
    api_as: Any, resources: dict
) -> None:
    changed = api_as("admin").patch(
        "/api/v1/queues/nlp-train/", {"idle_reclaim_after_s": 7200}, format="json"
    )
    assert changed.status_code == 200, changed.content
    body = api_as("member").get("/api/v1/queues/nlp-train/").json()
    assert (body["idle_alert_after_s"], body["idle_reclaim_after_s"]) == (None, 7200)


@pytest.mark.parametrize(
    ("url", "body", "field"),
    [
        ("/api/v1/priority-classes/normal/", {"idle_reclaim_after_s": 0}, "idle_reclaim_after_s"),
        ("/api/v1/priority-classes/normal/", {"idle_alert_after_s": -60}, "idle_alert_after_s"),
        (
            "/api/v1/priority-classes/normal/",
            {"idle_alert_after_s": 3600, "idle_reclaim_after_s": 600},
            "idle_reclaim_after_s",
        ),
        (
            "/api/v1/queues/nlp-train/",
            {"idle_alert_after_s": 7200, "idle_reclaim_after_s": 7200},
            "idle_reclaim_after_s",
        ),
        ("/api/v1/queues/nlp-train/", {"idle_alert_after_s": "soon"}, "idle_alert_after_s"),
    ],
    ids=[
        "a class reclaiming after 0 s",
        "a class alerting after a negative time",
        "a class reclaiming before it alerts",
        "a queue reclaiming when it alerts",
        "a queue alerting after no number",
    ],
)
def test_a_bad_idle_timeout_answers_400_naming_the_field(
    api_as: Any, resources: dict, url: str, body: dict, field: str
) -> None:
    response = api_as("admin").patch(url, body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert PriorityClass.objects.get(name="normal").idle_reclaim_after_s is None
    assert Queue.objects.get(name="nlp-train").idle_alert_after_s is None


def test_only_admins_set_an_idle_policy(api_as: Any, resources: dict) -> None:
    response = api_as("lead").patch(
        "/api/v1/priority-classes/normal/", {"idle_reclaim_after_s": 60}, format="json"
    )
    assert response.status_code == 403
    assert PriorityClass.objects.get(name="normal").idle_reclaim_after_s is None


def test_a_workloads_idle_spell_is_in_the_workloads_api(api_as: Any, resources: dict) -> None:
    from gpupool.inventory.models import Node
    from gpupool.workloads.actions import PlacementSpec, do_transition_workload

    workload = resources["own_workload"]
    start = timezone.now() - timedelta(hours=1)
    placements = [PlacementSpec("main", 0, Node.objects.get(name="n1"), [0, 1, 2, 3])]
    do_transition_workload(workload, "admitted", reason="fits", at=start, placements=placements)
    do_transition_workload(workload, "running", reason="started", at=start)
    since = timezone.now() - timedelta(minutes=30)
    do_record_activity([], idle_since={workload.pk: since})  # the sampler's write
    body = api_as("member").get(f"/api/v1/workloads/{workload.namespace}/{workload.name}/")
    assert body.status_code == 200, body.content
    assert body.json()["idle_since"] is not None
    do_record_activity([], idle_since={workload.pk: None})
    body = api_as("member").get(f"/api/v1/workloads/{workload.namespace}/{workload.name}/")
    assert body.json()["idle_since"] is None


def test_a_finished_workload_has_no_idle_spell(api_as: Any, resources: dict) -> None:
    """The sampler writes a spell while the GPUs are held; a workload that ended kept its
    last one, and the API showed a succeeded workload idle since its admission."""
    from gpupool.inventory.models import Node
    from gpupool.workloads.actions import PlacementSpec, do_transition_workload

    workload = resources["own_workload"]
    start = timezone.now() - timedelta(hours=1)
    placements = [PlacementSpec("main", 0, Node.objects.get(name="n1"), [0, 1, 2, 3])]
    do_transition_workload(workload, "admitted", reason="fits", at=start, placements=placements)
    do_transition_workload(workload, "running", reason="started", at=start)
    do_record_activity([], idle_since={workload.pk: timezone.now() - timedelta(minutes=30)})
    workload.refresh_from_db()
    url = f"/api/v1/workloads/{workload.namespace}/{workload.name}/"
    assert api_as("member").get(url).json()["idle_since"] is not None
    do_transition_workload(workload, "succeeded", reason="its pods succeeded")
    assert api_as("member").get(url).json()["idle_since"] is None
    listed = api_as("member").get("/api/v1/workloads/?state=succeeded").json()["results"]
    assert [row["idle_since"] for row in listed if row["name"] == workload.name] == [None]
