"""``PreemptionEvent.nodes``: the names of the nodes the victim ran on when it was stopped, so
that an admin eviction names the drain of its own node (``workloads.queries.eviction_drains``),
not any drain of its flavors' nodes. Events recorded before keep an empty list, and the old
wording."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounting", "0008_usage_keys_indexed_by_composites"),
    ]

    operations = [
        migrations.AddField(
            model_name="preemptionevent",
            name="nodes",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Names of the nodes the victim ran on when it was stopped, sorted "
                "(empty in events recorded before they were kept): which node's drain an admin "
                "eviction was.",
            ),
        ),
    ]
