"""Django app configuration for ``gpupool.audit``."""

from django.apps import AppConfig


class AuditConfig(AppConfig):
    """The audit log of policy changes."""

    name = "gpupool.audit"
    label = "audit"
    default_auto_field = "django.db.models.BigAutoField"
