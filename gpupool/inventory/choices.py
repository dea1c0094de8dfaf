"""Enumerations of the inventory app."""

from django.db import models


class Sharing(models.TextChoices):
    """How a flavor's GPUs are handed to pods."""

    EXCLUSIVE = "exclusive", "exclusive (whole GPUs)"
    SHARED = "shared", "shared (milli-GPU fractions)"
    MIG = "mig", "MIG (one hardware partition profile)"
