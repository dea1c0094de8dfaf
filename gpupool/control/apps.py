"""Django app configuration for ``gpupool.control``."""

from django.apps import AppConfig


class ControlConfig(AppConfig):
    """Scheduling cycle records and the health endpoint."""

    name = "gpupool.control"
    label = "control"
    default_auto_field = "django.db.models.BigAutoField"
