"""The audit log records who, when, before and after; a refused change leaves no trace.

The suite runs on PostgreSQL and on SQLite (``make test`` runs both); these tests also assert
that the JSON stored in ``before``/``after`` reads back unchanged on whichever database runs.
"""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone
from domain_builders import flavor, node, queue, quota, user

from gpupool.audit.models import AuditEvent
from gpupool.quotas.actions import do_set_queue_quota
from gpupool.quotas.models import QueueQuota

pytestmark = pytest.mark.django_db


@pytest.fixture
def team() -> tuple[object, object]:
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    return queue("team", parent=queue("root")), h100


def test_a_quota_change_records_actor_time_before_and_after(team: tuple) -> None:
    admin = user("root-admin", admin=True)
    started = timezone.now()
    quota(team[0], team[1], 2, 4, 8)
    do_set_queue_quota(
        team[0], team[1], guarantee=4, deserved=4, capability=8, acting_user=admin, reason="why"
    )
    event = AuditEvent.objects.filter(action="quotas.set_queue_quota").order_by("-id").first()
    assert event is not None
    assert event.actor == admin and event.actor_name == "root-admin"
    assert started - timedelta(seconds=1) <= event.at <= timezone.now()
    assert event.object_type == "quotas.queuequota"
    assert event.object_id == str(QueueQuota.objects.get().pk)
    assert event.object_repr == "team/h100: 4/4/8"
    assert event.before == {
        "id": QueueQuota.objects.get().pk,
        "queue_id": team[0].pk,
        "flavor_id": team[1].pk,
        "guarantee": "2.000",
        "deserved": "4.000",
        "capability": "8.000",
    }
    assert event.after is not None and event.after["guarantee"] == "4.000"
    assert event.changed_fields() == ["guarantee"]
    assert event.reason == "why"


def test_setting_a_quota_to_the_values_it_has_writes_no_audit_row(team: tuple) -> None:
    """An action that changes nothing leaves the audit log as it was."""
    admin = user("root-admin", admin=True)
    quota(team[0], team[1], 2, 4, 8)
    count = AuditEvent.objects.count()
    do_set_queue_quota(team[0], team[1], guarantee=2, deserved=4, capability=8, acting_user=admin)
    assert AuditEvent.objects.count() == count


def test_the_stored_json_reads_back_the_same_on_this_database(team: tuple) -> None:
    quota(team[0], team[1], 1, 2, 3)
    event = AuditEvent.objects.get(action="quotas.set_queue_quota")
    # filter on a key inside the JSON: works on PostgreSQL (jsonb) and SQLite (JSON1)
    assert AuditEvent.objects.filter(after__guarantee="1.000").get() == event
    assert AuditEvent.objects.filter(before__isnull=True).filter(pk=event.pk).exists()
    assert connection.vendor in {"postgresql", "sqlite"}


def test_a_change_that_changes_nothing_writes_no_audit_row(team: tuple) -> None:
    quota(team[0], team[1], 1, 2, 3)
    quota(team[0], team[1], 1, 2, 3)
    assert AuditEvent.objects.filter(action="quotas.set_queue_quota").count() == 1


def test_a_refused_change_writes_neither_the_change_nor_an_audit_row(team: tuple) -> None:
    quota(team[0], team[1], 1, 2, 3)
    count = AuditEvent.objects.count()
    with pytest.raises(ValidationError):
        quota(team[0], team[1], 9, 2, 3)
    assert AuditEvent.objects.count() == count
    assert QueueQuota.objects.get().guarantee == 1


def test_the_actor_name_survives_the_users_deletion(team: tuple) -> None:
    admin = user("gone", admin=True)
    do_set_queue_quota(team[0], team[1], guarantee=0, deserved=1, capability=1, acting_user=admin)
    admin.delete()
    event = AuditEvent.objects.get(action="quotas.set_queue_quota")
    assert event.actor is None and event.actor_name == "gone"


def test_a_persons_change_is_audited_on_the_pools_clock_as_the_record_it_changes(
    team: tuple,
) -> None:
    """A simulated cluster runs ahead of the wall clock (the demo: an hour a minute): a
    quota request decided "at 16:00" on its page was audited at 09:37. People's actions stamp
    their records with the pool's clock (``control.clock.pool_now``); their audit rows too."""
    from gpupool.control.actions import do_finish_cycle, do_start_cycle
    from gpupool.control.clock import pool_now
    from gpupool.control.models import SchedulingCycle

    cycle = do_start_cycle(at=timezone.now())
    do_finish_cycle(cycle, at=timezone.now(), status="succeeded")
    ahead = timezone.now() + timedelta(hours=6)
    SchedulingCycle.objects.filter(pk=cycle.pk).update(cluster_at=ahead)  # as a record does
    admin = user("root-admin", admin=True)
    quota(team[0], team[1], 2, 4, 8)
    do_set_queue_quota(team[0], team[1], guarantee=4, deserved=4, capability=8, acting_user=admin)
    event = AuditEvent.objects.filter(action="quotas.set_queue_quota").order_by("-id").first()
    assert event is not None
    assert abs((event.at - ahead).total_seconds()) < 1 and pool_now() >= event.at
