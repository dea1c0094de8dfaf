"""Keys almost always empty indexed only where set; a key a composite index leads with not
indexed alone.

``Workload.submitter``, ``Workload.evicting_for`` and ``WorkloadTransition.actor`` are empty
on the control loop's rows: their full indexes (Django's key indexes) held an entry for every
row written, for lookups that are all equalities. Each is replaced by a partial index
``WHERE <column> IS NOT NULL``, which every equality on the column may use (the database's
own key checks on deleting a user or a workload included). ``Placement.pod_set`` loses its
own index: ``placement_unique_pod`` (pod_set, pod_index) leads with it.

On PostgreSQL the ``AlterField`` operations drop the old indexes (found by the catalog) and
the ``AddIndex`` operations build the partial ones, in the migration's transaction
(docs/operations.md, "Upgrading": the locks). Backwards, the partial indexes are dropped and
the full ones rebuilt.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("quotas", "0007_prioritybudget_balance"),
        ("workloads", "0008_workload_hot_updates"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="placement",
            name="pod_set",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="placements",
                to="workloads.podset",
            ),
        ),
        migrations.AlterField(
            model_name="workload",
            name="evicting_for",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                help_text="Running, being evicted to make room for this pending workload, and not gone yet (written by the control loop).",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="victims_leaving",
                to="workloads.workload",
            ),
        ),
        migrations.AlterField(
            model_name="workload",
            name="submitter",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="workloads",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="workloadtransition",
            name="actor",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="workload_transitions",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddIndex(
            model_name="workload",
            index=models.Index(
                condition=models.Q(("submitter__isnull", False)),
                fields=["submitter"],
                name="workload_submitter_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="workload",
            index=models.Index(
                condition=models.Q(("evicting_for__isnull", False)),
                fields=["evicting_for"],
                name="workload_evicting_for_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="workloadtransition",
            index=models.Index(
                condition=models.Q(("actor__isnull", False)),
                fields=["actor"],
                name="workloadtransition_actor_idx",
            ),
        ),
    ]
