"""Django app configuration for ``gpupool.workloads``."""

from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    """Workloads, their pod sets, placements and state transitions."""

    name = "gpupool.workloads"
    label = "workloads"
    default_auto_field = "django.db.models.BigAutoField"
