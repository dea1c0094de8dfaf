"""Django app configuration for ``gpupool.quotas``."""

from django.apps import AppConfig


class QuotasConfig(AppConfig):
    """The queue tree, quotas, priority classes, budgets and quota requests."""

    name = "gpupool.quotas"
    label = "quotas"
    default_auto_field = "django.db.models.BigAutoField"
