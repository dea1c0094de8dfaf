"""Django app configuration for ``gpupool.accounting``."""

from django.apps import AppConfig


class AccountingConfig(AppConfig):
    """Usage intervals and preemption events."""

    name = "gpupool.accounting"
    label = "accounting"
    default_auto_field = "django.db.models.BigAutoField"
