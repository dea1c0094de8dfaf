"""Usage intervals give GPU-hours and cost; preemption events name victim, cause and loss."""

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from domain_builders import flavor, priority_class, queue, tenant

from gpupool.accounting.actions import do_close_usage, do_open_usage, do_record_preemption
from gpupool.accounting.models import PreemptionEvent, UsageInterval
from gpupool.control.actions import do_start_cycle
from gpupool.quotas.actions import do_delete_queue
from gpupool.quotas.models import Queue
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

T0 = datetime.fromisoformat("2026-11-29T08:00:00+00:00")


@pytest.fixture
def jobs() -> dict[str, object]:
    h100 = flavor("h100", hourly_price=Decimal("2.5"))
    priority_class("normal", default=True)
    root = queue("root")
    a = queue("team-a", parent=root, tenant=tenant("a"))
    b = queue("team-b", parent=root, tenant=tenant("b"))

    def job(name: str, on: object) -> Workload:
        return do_submit_workload(
            name, queue=on, pod_sets=[PodSetSpec(1, gpus=4, flavor=h100)], at=T0
        )

    return {"h100": h100, "victim": job("victim", a), "urgent": job("urgent", b)}


def test_an_interval_charges_gpu_hours_and_cost_to_the_tenant(jobs: dict) -> None:
    interval = do_open_usage(jobs["victim"], flavor=jobs["h100"], gpus=4, at=T0)
    assert interval.tenant is not None and interval.tenant.name == "a"
    # open: counted up to now
    assert interval.gpu_hours(T0 + timedelta(minutes=30)) == 2
    assert do_close_usage(jobs["victim"], at=T0 + timedelta(hours=3)) == 1
    interval.refresh_from_db()
    assert interval.gpu_hours(T0 + timedelta(days=9)) == 12
    assert interval.cost(T0) == Decimal(30)


def test_an_interval_cannot_end_before_it_starts(jobs: dict) -> None:
    do_open_usage(jobs["victim"], flavor=jobs["h100"], gpus=4, at=T0)
    with pytest.raises(ValidationError) as error:
        do_close_usage(jobs["victim"], at=T0 - timedelta(seconds=1))
    assert "ended_at" in error.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        UsageInterval.objects.update(ended_at=T0 - timedelta(hours=1))


def test_an_interval_is_charged_to_the_workloads_own_queue(jobs: dict) -> None:
    interval = UsageInterval(
        workload=jobs["victim"],
        tenant=jobs["urgent"].queue.tenant,
        queue=jobs["urgent"].queue,
        flavor=jobs["h100"],
        priority_class=jobs["victim"].priority_class,
        gpus=4,
        started_at=T0,
    )
    with pytest.raises(ValidationError) as error:
        interval.full_clean()
    assert "queue" in error.value.message_dict


def test_a_preemption_records_both_sides_and_the_loss(jobs: dict) -> None:
    cycle = do_start_cycle(at=T0)
    event = do_record_preemption(
        jobs["victim"],
        reason="preempt",
        at=T0 + timedelta(hours=1),
        gpus_freed=4,
        lost_gpu_hours=4,
        preemptor=jobs["urgent"],
        cycle=cycle,
    )
    assert event.victim_tenant is not None and event.preemptor_tenant is not None
    assert (event.victim_tenant.name, event.preemptor_tenant.name) == ("a", "b")
    assert str(event) == "victim preempt for urgent"


@pytest.mark.parametrize(
    ("reason", "with_preemptor", "field"),
    [
        ("preempt", False, "preemptor"),
        ("node-failure", True, "preemptor"),
        ("bored", False, "reason"),
    ],
    ids=["preempt without preemptor", "node failure with preemptor", "unknown reason"],
)
def test_a_bad_preemption_is_refused_naming_the_field(
    jobs: dict, reason: str, with_preemptor: bool, field: str
) -> None:
    with pytest.raises(ValidationError) as error:
        do_record_preemption(
            jobs["victim"],
            reason=reason,
            at=T0,
            gpus_freed=4,
            lost_gpu_hours=0,
            preemptor=jobs["urgent"] if with_preemptor else None,
        )
    assert field in error.value.message_dict
    assert not PreemptionEvent.objects.exists()


def test_a_workload_cannot_preempt_itself(jobs: dict) -> None:
    with pytest.raises(ValidationError) as error:
        do_record_preemption(
            jobs["victim"], reason="preempt", at=T0, gpus_freed=4, lost_gpu_hours=0,
            preemptor=jobs["victim"],
        )  # fmt: skip
    assert "preemptor" in error.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        PreemptionEvent.objects.create(
            at=T0, reason="preempt", victim=jobs["victim"], victim_queue=jobs["victim"].queue,
            preemptor=jobs["victim"], gpus_freed=1, lost_gpu_hours=0,
        )  # fmt: skip


def test_a_queue_named_only_by_usage_is_not_deleted_though_the_copy_has_no_database_key(
    jobs: dict,
) -> None:
    """An interval's queue, tenant and class are copies of its workload's, without a database
    constraint (one check a key at every commit of the loop's record); the ORM still refuses
    to delete a queue that usage names, and says which rows name it."""
    interval = do_open_usage(jobs["victim"], flavor=jobs["h100"], gpus=4, at=T0)
    emptied = queue("emptied", parent=jobs["victim"].queue.parent)
    UsageInterval.objects.filter(pk=interval.pk).update(queue=emptied)  # as history would
    with pytest.raises(ValidationError, match="usage intervals"):
        do_delete_queue(emptied, acting_user=None, reason="tidy up")
    assert Queue.objects.filter(pk=emptied.pk).exists()
