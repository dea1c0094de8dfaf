"""``UsageInterval.tenant`` and ``UsageInterval.queue`` not indexed alone: the composite
indexes ``usage_tenant_start_idx`` (tenant, started_at) and ``usage_queue_start_idx`` (queue,
started_at) lead with them and serve every lookup by them. The ``AlterField`` operations drop
the two single-column indexes (rebuilt when migrated backwards).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounting", "0007_copied_keys_unconstrained"),
        ("quotas", "0007_prioritybudget_balance"),
        ("tenancy", "0002_tenantnamespace"),
    ]

    operations = [
        migrations.AlterField(
            model_name="usageinterval",
            name="queue",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="usage",
                to="quotas.queue",
            ),
        ),
        migrations.AlterField(
            model_name="usageinterval",
            name="tenant",
            field=models.ForeignKey(
                blank=True,
                db_constraint=False,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="usage",
                to="tenancy.tenant",
            ),
        ),
    ]
