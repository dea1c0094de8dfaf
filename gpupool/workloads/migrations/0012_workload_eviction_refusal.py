"""``Workload.eviction_refusal``: the eviction of a running workload a PodDisruptionBudget
refused last, kept by the control loop until an eviction is accepted or no longer wanted, so
its page and the workloads API can name the budget (docs/control-loop.md, "Draining a
node"). Null on every row: nothing to fill in."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0011_ended_preemptions_finished"),
    ]

    operations = [
        migrations.AddField(
            model_name="workload",
            name="eviction_refusal",
            field=models.JSONField(
                blank=True,
                default=None,
                help_text="Running, and the eviction gpupool last asked for was refused by a "
                "PodDisruptionBudget: when, the budget, why it was evicted (admin for a drain) "
                "and for whom, on which nodes. Cleared once an eviction is accepted or no "
                "longer wanted (written by the control loop).",
                null=True,
            ),
        ),
    ]
