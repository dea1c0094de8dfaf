"""Enumerations of the inventory app."""

from django.db import models


class Sharing(models.TextChoices):
    """How a flavor's GPUs are handed to pods."""

    EXCLUSIVE = "exclusive", "exclusive (whole GPUs)"
    SHARED = "shared", "shared (milli-GPU fractions)"
    MIG = "mig", "MIG (one hardware partition profile)"


class NodeState(models.TextChoices):
    """What a node is doing, in one word (``Node.state``): what the pages and the nodes API
    say of it. As Slurm and Kubernetes put it: a drain is *draining* while
    work remains and *drained* once the node is empty, and the node stays cordoned until an
    admin uncordons it. *cordoned* is gpupool's own cordon, which gpupool lifts; a cordon made
    in the cluster (``kubectl cordon``) is the cluster's, lifted there, so it is *excluded*
    with the other reasons the cluster takes no pods on a node."""

    READY = "ready", "ready (takes placements)"
    CORDONED = "cordoned", "cordoned by gpupool (no new placements; what runs there stays)"
    DRAINING = (
        "draining",
        (
            "draining (cordoned; its work is being evicted, or waits on an eviction a "
            "PodDisruptionBudget refused)"
        ),
    )
    DRAINED = "drained", "drained (cordoned and empty; back in service once uncordoned)"
    EXCLUDED = (
        "excluded",
        "excluded (the cluster takes no pods there: cordoned in the cluster, not Ready, a "
        "lifecycle taint)",
    )
    GONE = "gone", "gone from the cluster"
