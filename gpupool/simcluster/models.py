"""The simulated cluster as rows: its clock and revision, and its Kubernetes objects.

Not domain state: this is what etcd is to a real cluster, written only through the
simulated cluster's store (``store.py``), which the control loop reaches through the
``ClusterBackend`` protocol like any other cluster.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class SimulatedClusterState(models.Model):
    """The simulated cluster's clock and the revision of its last write (one row)."""

    revision = models.BigIntegerField(
        default=0, help_text="The revision of the last write; every write takes the next one."
    )
    compacted_revision = models.BigIntegerField(
        default=0,
        help_text="Tombstones up to this revision are gone: a reader behind it re-lists.",
    )
    clock_origin = models.FloatField(
        help_text="Simulated time (POSIX seconds) at the wall-clock instant wall_origin."
    )
    wall_origin = models.FloatField(help_text="Wall-clock time (POSIX seconds) of clock_origin.")
    speed = models.FloatField(
        default=1.0, help_text="Simulated seconds per wall-clock second (60: an hour a minute)."
    )
    last_reading = models.FloatField(
        default=0.0, help_text="The simulated time of the last write (where a paused demo resumes)."
    )

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(speed__gt=0), name="simulated_clock_moves_forward")
        ]

    def __str__(self) -> str:
        return f"simulated cluster at revision {self.revision} (speed {self.speed:g})"


class SimulatedObject(models.Model):
    """One Kubernetes object of the simulated cluster (a tombstone once deleted)."""

    kind = models.CharField(max_length=32)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    revision = models.BigIntegerField(db_index=True)
    deleted = models.BooleanField(default=False)
    due_at = models.FloatField(
        null=True, blank=True, db_index=True, help_text="When a controller next changes it."
    )
    node = models.CharField(max_length=253, blank=True, db_index=True)
    body = models.JSONField(help_text="The object as the Kubernetes API would return it.")
    sim = models.JSONField(default=dict, blank=True, help_text="The simulator's bookkeeping.")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "namespace", "name"], name="simulated_object_unique"
            )
        ]
        indexes = [models.Index(fields=["kind", "namespace"], name="simulated_object_kind_ns")]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"
