"""No workload is admitted before it was submitted (``workload_admitted_after_submitted``).

A cycle reads its clock before it reads the pending work, and a submission stamped after that
moment (one landing in between, or a submitter's clock ahead of the loop's: the demo's
generator on a cluster an hour a minute) was admitted at the cycle's moment, before its
submission; its timeline ran backwards. The record now admits such work at its submission
(``control.actions._record_admissions``). Rows recorded before are mended first, as the record
now writes them: their admission, and every transition stamped before their submission, at
the submission."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models
from django.db.models import F, OuterRef, Subquery


def mend(apps: Any, schema_editor: Any) -> None:
    Workload = apps.get_model("workloads", "Workload")
    WorkloadTransition = apps.get_model("workloads", "WorkloadTransition")
    Workload.objects.filter(admitted_at__lt=F("submitted_at")).update(admitted_at=F("submitted_at"))
    submitted = Workload.objects.filter(pk=OuterRef("workload_id")).values("submitted_at")[:1]
    early = WorkloadTransition.objects.filter(at__lt=Subquery(submitted))
    early.update(at=Subquery(submitted))


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0012_workload_eviction_refusal"),
    ]

    operations = [
        migrations.RunPython(mend, migrations.RunPython.noop, elidable=True),
        migrations.AddConstraint(
            model_name="workload",
            constraint=models.CheckConstraint(
                condition=models.Q(admitted_at__isnull=True)
                | models.Q(admitted_at__gte=models.F("submitted_at")),
                name="workload_admitted_after_submitted",
            ),
        ),
    ]
