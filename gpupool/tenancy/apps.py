"""Django app configuration for ``gpupool.tenancy``."""

from django.apps import AppConfig


class TenancyConfig(AppConfig):
    """Tenants, their members and site-wide roles."""

    name = "gpupool.tenancy"
    label = "tenancy"
    default_auto_field = "django.db.models.BigAutoField"
