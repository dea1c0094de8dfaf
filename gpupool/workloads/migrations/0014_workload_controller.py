"""``Workload.controller_kind`` and ``controller_name``: the controller that owns the pods of a
workload the cluster sync registered (a Job's pods' is the Job), so that cancelling it can say
what becomes of its pods (docs/control-loop.md, "apply"). Empty on every row: work registered
before names no controller, and its cancel says what holds for any controller's pods."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0013_admitted_after_submitted"),
    ]

    operations = [
        migrations.AddField(
            model_name="workload",
            name="controller_kind",
            field=models.CharField(
                blank=True,
                default="",
                help_text="The kind of the controller that owns its pods (Job, ReplicaSet, ...), "
                "as its pods' controlling owner reference said when the cluster sync registered "
                "it; empty for a bare pod's and gpupool's own (written by the control loop).",
                max_length=63,
            ),
        ),
        migrations.AddField(
            model_name="workload",
            name="controller_name",
            field=models.CharField(
                blank=True,
                default="",
                help_text="The name of that controller, in the workload's namespace; empty with "
                "its kind (written by the control loop).",
                max_length=253,
            ),
        ),
    ]
