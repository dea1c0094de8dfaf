"""``gpupool.api.rows.PlannedRows`` renders the bytes DRF renders: every list and detail whose
serializer plans its rows answers the same with the plan and with DRF's own
``Serializer.to_representation``, nulls on the way (no submitter, no actor, no tenant) and a
method named as a field's source included."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from resources_pool import pool, submit
from rest_framework import serializers

from gpupool.accounting.actions import do_open_usage
from gpupool.api.rows import PlannedRows
from gpupool.workloads.actions import PlacementSpec, do_transition_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


def by_drf(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every planned serializer render as plain DRF does."""
    monkeypatch.setattr(
        PlannedRows,
        "to_representation",
        lambda self, instance: serializers.Serializer.to_representation(self, instance),
    )


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    """The small pool, one workload running (a placement, a usage interval, a transition by
    the loop: no actor) and one submitted by nobody (no submitter)."""
    made = pool(world)
    from gpupool.inventory.models import Node

    running = submit("running-1", made["vision"], made["other_workload"].submitter, 4)
    start = timezone.now() - timedelta(hours=1)
    placement = PlacementSpec("main", 0, Node.objects.get(name="n1"), [0, 1, 2, 3])
    do_transition_workload(running, "admitted", reason="fits", at=start, placements=[placement])
    do_transition_workload(running, "running", reason="started", at=start)
    do_open_usage(running, flavor=made["h100"], gpus=4, at=start)
    Workload.objects.filter(name="train-1", namespace="nlp").update(submitter=None)
    return made


PATHS = (
    ("admin", "/api/v1/workloads/"),
    ("lead", "/api/v1/workloads/"),
    ("admin", "/api/v1/workloads/vision/running-1/"),
    ("lead", "/api/v1/workloads/nlp/train-1/"),
    ("admin", "/api/v1/queues/"),
    ("member", "/api/v1/queues/nlp-train/"),
    ("admin", "/api/v1/preemptions/"),
    ("member", "/api/v1/preemptions/"),
    ("finance", "/api/v1/usage/"),
    ("lead", "/api/v1/usage/?format=csv"),
    ("member", "/api/v1/tenants/"),
    ("admin", "/api/v1/memberships/"),
)


def body(response: Any) -> bytes:
    """A response's bytes, streamed or not."""
    if response.streaming:
        return b"".join(response.streaming_content)
    return bytes(response.content)


@pytest.mark.parametrize(("role", "path"), PATHS)
def test_a_planned_list_answers_the_bytes_drf_answers(
    api_as: Any, resources: dict, monkeypatch: pytest.MonkeyPatch, role: str, path: str
) -> None:
    planned = api_as(role).get(path)
    assert planned.status_code == 200, planned.content
    with monkeypatch.context() as patched:
        by_drf(patched)
        plain = api_as(role).get(path)
    assert plain.status_code == 200
    rendered = body(planned)
    assert rendered == body(plain)
    assert len(rendered) > 2  # something was rendered


class MethodSource(PlannedRows, serializers.ModelSerializer[Workload]):
    """A field whose source is a model method, and one whose path meets a null."""

    qualified = serializers.CharField(source="qualified_name", read_only=True)
    submitter_name = serializers.CharField(
        source="submitter.username", read_only=True, allow_null=True, default=None
    )
    tenant_name = serializers.CharField(source="queue.tenant.name", read_only=True)

    class Meta:
        model = Workload
        fields = ("qualified", "submitter_name", "tenant_name", "submitted_at", "queue")


def test_a_method_as_source_is_called_and_a_null_on_the_path_takes_the_default(
    resources: dict,
) -> None:
    workload = Workload.objects.get(name="train-1", namespace="nlp")
    row = MethodSource().to_representation(workload)
    assert row == serializers.ModelSerializer.to_representation(MethodSource(), workload)
    assert row["qualified"] == "nlp/train-1"
    assert row["submitter_name"] is None
    assert row["tenant_name"] == "nlp"
    assert row["submitted_at"].endswith("Z")
