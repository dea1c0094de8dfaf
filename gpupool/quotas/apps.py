"""Django app configuration for ``gpupool.quotas``."""

from django.apps import AppConfig


class QuotasConfig(AppConfig):
    """The queue tree, quotas, priority classes, budgets and quota requests."""

    name = "gpupool.quotas"
    label = "quotas"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the queue quotas' system check (a database check: ``migrate`` runs it)."""
        from django.core import checks

        from gpupool.quotas.checks import check_whole_gpu_quotas

        checks.register(check_whole_gpu_quotas, checks.Tags.database)
