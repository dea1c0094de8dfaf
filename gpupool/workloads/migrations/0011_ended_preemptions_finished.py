"""Preempted work that is not requeued ended there: a bare pod (nothing makes it again) or
work reclaimed for sitting idle (``lifecycle.ENDING_REASONS``: its last preemption's reason is
``idle``). The loop now stamps its ``finished_at`` with the preemption; rows recorded before
kept it null and read as unfinished for ever (holding their namespace, queue and flavor). This
stamps them with their last preemption, as ``workloads.queries.preempted_summary`` judges them."""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import Max


def stamp(apps: Any, schema_editor: Any) -> None:
    Workload = apps.get_model("workloads", "Workload")
    PreemptionEvent = apps.get_model("accounting", "PreemptionEvent")
    WorkloadTransition = apps.get_model("workloads", "WorkloadTransition")
    rows = Workload.objects.filter(state="preempted", finished_at__isnull=True)
    for pk, origin in rows.values_list("pk", "origin").iterator():
        last = (
            PreemptionEvent.objects.filter(victim_id=pk).order_by("-at", "-pk").values_list(
                "reason", flat=True
            )
        ).first()
        if origin != "bare" and last != "idle":
            continue  # preempted and about to be requeued
        at = WorkloadTransition.objects.filter(workload_id=pk, to_state="preempted").aggregate(
            at=Max("at")
        )["at"]
        if at is not None:
            Workload.objects.filter(pk=pk).update(finished_at=at)


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0010_workload_explanation"),
        ("accounting", "0008_usage_keys_indexed_by_composites"),
    ]

    operations = [migrations.RunPython(stamp, migrations.RunPython.noop)]
