"""A scheduling cycle's row is closed with its rules checked in Python: a finish before the
start is refused, naming the field, and a good one costs one UPDATE (no query per check)."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.control.models import SchedulingCycle

pytestmark = pytest.mark.django_db

START = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def test_a_cycle_finished_before_it_started_is_refused_naming_the_field() -> None:
    cycle = do_start_cycle(at=START)
    with pytest.raises(ValidationError) as refused:
        do_finish_cycle(cycle, at=START - timedelta(seconds=1), status="succeeded")
    assert "finished_at" in refused.value.message_dict
    assert SchedulingCycle.objects.get(pk=cycle.pk).finished_at is None  # nothing written


def test_closing_a_cycle_checks_its_rules_without_asking_the_database(
    django_assert_max_num_queries: Any,
) -> None:
    cycle = do_start_cycle(at=START)
    with django_assert_max_num_queries(3):  # the savepoint, the UPDATE, its release
        do_finish_cycle(
            cycle, at=START + timedelta(seconds=2), status="succeeded", timings={"sync": 0.5}
        )
    row = SchedulingCycle.objects.get(pk=cycle.pk)
    assert (row.status, row.sync_s, row.duration_s()) == ("succeeded", 0.5, 2.0)
