"""Django app configuration for ``gpupool.utilization``."""

from django.apps import AppConfig


class UtilizationConfig(AppConfig):
    """GPU use against allocation: activity windows per workload, failing GPUs from DCGM."""

    name = "gpupool.utilization"
    label = "utilization"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the utilisation settings' system check."""
        from django.core import checks

        from gpupool.utilization.checks import check_utilization_source

        checks.register(check_utilization_source)
