"""The cycles API names the pool's clock at each cycle (``cluster_at``) beside the wall
clock's ``started_at``: a simulated cluster runs ahead of the wall clock, and what a cycle
recorded is stamped with its cluster's clock."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.generators import SchemaGenerator

from gpupool.control.choices import CycleStatus
from gpupool.control.models import SchedulingCycle

pytestmark = pytest.mark.django_db


def test_the_cycles_api_answers_the_pools_clock_at_each_cycle_null_when_it_recorded_nothing(
    api_as: Any, world: Any
) -> None:
    # given a cycle whose cluster read a clock a day ahead of the wall, and one that
    # recorded nothing (no cluster clock)
    wall = timezone.now()
    ahead = SchedulingCycle.objects.create(
        started_at=wall - timedelta(seconds=10),
        finished_at=wall - timedelta(seconds=9),
        status=CycleStatus.SUCCEEDED,
        cluster_at=wall + timedelta(days=1),
    )
    skipped = SchedulingCycle.objects.create(
        started_at=wall, finished_at=wall, status=CycleStatus.SKIPPED
    )
    # when an admin lists the cycles and anyone reads the latest
    listed = api_as("admin").get("/api/v1/scheduling-cycles/").json()["results"]
    latest = api_as("member").get("/api/v1/scheduling-cycles/latest/").json()
    # then each names the pool's clock at the cycle, null for the one that recorded nothing
    by_id = {row["id"]: row for row in listed}
    assert by_id[ahead.pk]["cluster_at"] is not None
    assert _parsed(by_id[ahead.pk]["cluster_at"]) == ahead.cluster_at
    assert _parsed(by_id[ahead.pk]["started_at"]) == ahead.started_at
    assert by_id[skipped.pk]["cluster_at"] is None
    assert latest["id"] == skipped.pk and latest["cluster_at"] is None


def test_the_schema_documents_cluster_at_as_read_only_and_nullable() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for name in ("CycleSummary", "Cycle"):
        field = schema["components"]["schemas"][name]["properties"]["cluster_at"]
        assert field.get("readOnly") and field.get("nullable"), field
        assert "null for a cycle that recorded nothing" in field["description"]


def _parsed(text: str) -> datetime | None:
    return parse_datetime(text)
