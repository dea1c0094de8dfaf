# The queue position is counted from a rank kept while the order around it holds, instead of
# being written for every pending workload whose position moved (issue 14, B1-loop).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('workloads', '0006_idle_policy'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='workload',
            name='workload_queue_position_positive',
        ),
        migrations.RemoveIndex(
            model_name='workload',
            name='workload_pending_position_idx',
        ),
        migrations.RemoveField(
            model_name='workload',
            name='queue_position',
        ),
        migrations.AddField(
            model_name='workload',
            name='queue_rank',
            field=models.FloatField(blank=True, help_text="Its place in its queue's order as the last cycle served it: a key compared only within the queue, kept while the order around it holds (written by the control loop; empty when not pending or not seen by a cycle yet). The position is counted from it when read (queue_position).", null=True),
        ),
        migrations.AddIndex(
            model_name='workload',
            index=models.Index(condition=models.Q(('state', 'pending')), fields=['queue', 'queue_rank'], name='workload_pending_rank_idx'),
        ),
    ]
