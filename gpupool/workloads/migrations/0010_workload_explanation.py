"""Explanations in a table of their own (``WorkloadExplanation``).

The control loop's explanation of a pending workload (reason, sentence, facts) and its queue
rank move from ``workloads_workload`` to ``workloads_workloadexplanation``, keyed by the
workload and with no other index. On the workload's row, a first explanation made the row
about four times wider (no room for it on a full page: a new row version with an entry in each
of the table's indexes), and B1-loop's first cycle explained 5,180 workloads that way
(docs/benchmarks.md, B1-loop, "The first session of 2026-12-05"). Here a first explanation is
an insert, and a rewrite finds room on its page: the new table keeps 30% of each page free on
PostgreSQL (``fillfactor = 70``).

The explanations kept are copied (rows with a reason, a sentence or a rank), then the columns
are dropped; backwards, the columns come back and are filled from the table before it goes.
On PostgreSQL all of it runs in the migration's transaction (docs/operations.md,
"Upgrading"): a deployment holds a few thousand pending workloads, so the copy is short.
"""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import Q

FILLFACTOR = 70
BATCH = 2000


def _copy_out(apps, schema_editor):  # type: ignore[no-untyped-def]
    """The workloads' explanations into the new table."""
    workload = apps.get_model("workloads", "Workload")
    explanation = apps.get_model("workloads", "WorkloadExplanation")
    using = schema_editor.connection.alias
    kept = (
        workload.objects.using(using)
        .filter(~Q(pending_reason="") | ~Q(pending_detail="") | Q(queue_rank__isnull=False))
        .order_by("pk")
        .values_list("pk", "pending_reason", "pending_detail", "pending_facts", "queue_rank")
    )
    batch = []
    for pk, reason, detail, facts, rank in kept.iterator(chunk_size=BATCH):
        batch.append(
            explanation(
                workload_id=pk, reason=reason, detail=detail, facts=facts or {}, queue_rank=rank
            )
        )
        if len(batch) >= BATCH:
            explanation.objects.using(using).bulk_create(batch)
            batch = []
    explanation.objects.using(using).bulk_create(batch)


def _copy_back(apps, schema_editor):  # type: ignore[no-untyped-def]
    """The table's explanations back onto their workloads' rows."""
    workload = apps.get_model("workloads", "Workload")
    explanation = apps.get_model("workloads", "WorkloadExplanation")
    using = schema_editor.connection.alias
    rows = explanation.objects.using(using).order_by("pk")
    batch = []
    for row in rows.iterator(chunk_size=BATCH):
        batch.append(
            workload(
                pk=row.workload_id,
                pending_reason=row.reason,
                pending_detail=row.detail,
                pending_facts=row.facts,
                queue_rank=row.queue_rank,
            )
        )
        if len(batch) >= BATCH:
            _update(workload, using, batch)
            batch = []
    _update(workload, using, batch)


def _update(workload, using, batch):  # type: ignore[no-untyped-def]
    workload.objects.using(using).bulk_update(
        batch, ["pending_reason", "pending_detail", "pending_facts", "queue_rank"]
    )


def _fillfactor(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor != "postgresql":
        return  # SQLite has no fill factor
    table = schema_editor.quote_name("workloads_workloadexplanation")
    schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {FILLFACTOR})")


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0009_keys_indexed_where_needed"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkloadExplanation",
            fields=[
                (
                    "workload",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="explanation",
                        serialize=False,
                        to="workloads.workload",
                    ),
                ),
                (
                    "reason",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("budget", "budget"),
                            ("quota", "quota"),
                            ("capacity", "capacity"),
                            ("fragmentation", "fragmentation"),
                            ("topology", "topology"),
                            ("gang", "gang"),
                            ("waiting-for-preemption", "waiting-for-preemption"),
                            ("behind", "behind"),
                        ],
                        default="",
                        help_text="The decision core's reason it waits.",
                        max_length=32,
                    ),
                ),
                (
                    "detail",
                    models.TextField(blank=True, help_text="The explanation as a sentence."),
                ),
                (
                    "facts",
                    models.JSONField(
                        blank=True,
                        default=dict,
                        help_text="The explanation's facts, e.g. asked and free GPUs.",
                    ),
                ),
                (
                    "queue_rank",
                    models.FloatField(
                        blank=True,
                        help_text="Its place in its queue's order as the last cycle served it: a key compared only within the queue, kept while the order around it holds (empty when not ranked). The position is counted from it when read (queue_position).",
                        null=True,
                    ),
                ),
            ],
        ),
        migrations.RunPython(_fillfactor, migrations.RunPython.noop, elidable=False),
        migrations.RunPython(_copy_out, _copy_back, elidable=False),
        migrations.RemoveConstraint(
            model_name="workload",
            name="workload_pending_reason_valid",
        ),
        migrations.RemoveField(
            model_name="workload",
            name="pending_detail",
        ),
        migrations.RemoveField(
            model_name="workload",
            name="pending_facts",
        ),
        migrations.RemoveField(
            model_name="workload",
            name="pending_reason",
        ),
        migrations.RemoveField(
            model_name="workload",
            name="queue_rank",
        ),
        migrations.AddConstraint(
            model_name="workloadexplanation",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("reason", ""),
                    (
                        "reason__in",
                        [
                            "budget",
                            "quota",
                            "capacity",
                            "fragmentation",
                            "topology",
                            "gang",
                            "waiting-for-preemption",
                            "behind",
                        ],
                    ),
                    _connector="OR",
                ),
                name="explanation_reason_valid",
            ),
        ),
    ]
