"""Django app configuration for ``gpupool.utilization``."""

from django.apps import AppConfig


class UtilizationConfig(AppConfig):
    """GPU use against allocation: activity windows per workload, failing GPUs from DCGM."""

    name = "gpupool.utilization"
    label = "utilization"
    default_auto_field = "django.db.models.BigAutoField"
