"""The loop's explanation and rank writes as heap-only (HOT) updates on PostgreSQL.

``queue_rank`` leaves the last index that held it (a queue's pending work is found by
``workload_pending_queue_idx``, its ranks sorted when read), and ``workloads_workload``
keeps 15% of each page free (``fillfactor = 85``): an update that changes no indexed column
and finds room on its row's page writes no index entry (docs/benchmarks.md, B1-loop, round 10,
``hot7``). The fill factor applies to pages written from now on; an existing table takes it
on its next ``VACUUM FULL`` or ``CLUSTER``. SQLite has no fill factor: nothing to do there.
"""

from django.db import migrations, models

FILLFACTOR = 85


def _fillfactor(value: int | None):  # type: ignore[no-untyped-def]
    def apply(apps, schema_editor):  # type: ignore[no-untyped-def]
        if schema_editor.connection.vendor != "postgresql":
            return
        table = schema_editor.quote_name("workloads_workload")
        if value is None:
            schema_editor.execute(f"ALTER TABLE {table} RESET (fillfactor)")
        else:
            schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {int(value)})")

    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0007_workload_queue_rank"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="workload",
            name="workload_pending_rank_idx",
        ),
        migrations.AddIndex(
            model_name="workload",
            index=models.Index(
                condition=models.Q(("state", "pending")),
                fields=["queue"],
                name="workload_pending_queue_idx",
            ),
        ),
        migrations.RunPython(_fillfactor(FILLFACTOR), _fillfactor(None), elidable=False),
    ]
