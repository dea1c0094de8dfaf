"""A queue's quota keeps its history: each change, and its removal, from when it was made."""

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from domain_builders import flavor, node, queue

from gpupool.inventory.models import Flavor
from gpupool.quotas.actions import do_delete_queue_quota, do_set_queue_quota
from gpupool.quotas.models import Queue, QueueQuota

pytestmark = pytest.mark.django_db

T0 = datetime.fromisoformat("2026-03-01T00:00:00+00:00")


@pytest.fixture
def team() -> Queue:
    node("n1", flavor("h100"), gpus=8)
    return queue("team", parent=queue("root"))


def set_levels(on: Queue, guarantee: int, deserved: int, capability: int, at: datetime) -> Any:
    h100 = Flavor.objects.get(name="h100")
    return do_set_queue_quota(
        on,
        h100,
        guarantee=guarantee,
        deserved=deserved,
        capability=capability,
        acting_user=None,
        at=at,
    )


def history(of: Queue) -> list[tuple[datetime, Decimal, Decimal, Decimal]]:
    return list(
        of.quota_changes.values_list("effective_from", "guarantee", "deserved", "capability")
    )


def test_each_change_of_a_quota_is_kept_from_when_it_takes_effect(team: Queue) -> None:
    set_levels(team, 4, 8, 8, T0)
    set_levels(team, 2, 8, 16, T0 + timedelta(hours=5))
    assert history(team) == [(T0, 4, 8, 8), (T0 + timedelta(hours=5), 2, 8, 16)]


def test_setting_the_same_levels_again_adds_no_history(team: Queue) -> None:
    set_levels(team, 4, 8, 8, T0)
    set_levels(team, 4, 8, 8, T0 + timedelta(hours=1))
    assert history(team) == [(T0, 4, 8, 8)]


def test_removing_a_quota_records_zero_levels(team: Queue) -> None:
    quota = set_levels(team, 4, 8, 8, T0)
    do_delete_queue_quota(quota, acting_user=None, at=T0 + timedelta(hours=2))
    assert history(team)[-1] == (T0 + timedelta(hours=2), 0, 0, 0)


def test_a_quota_cannot_change_before_its_last_recorded_change(team: Queue) -> None:
    set_levels(team, 4, 8, 8, T0)
    with pytest.raises(ValidationError) as refused:
        set_levels(team, 2, 8, 8, T0 - timedelta(hours=1))
    assert "guarantee" in refused.value.message_dict
    assert QueueQuota.objects.get(queue=team).guarantee == 4
    assert history(team) == [(T0, 4, 8, 8)]
