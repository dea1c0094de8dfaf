"""Django app configuration for ``gpupool.notifications``."""

from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    """Mail to the parties of quota requests and to the owners of workloads, and who opted out."""

    name = "gpupool.notifications"
    label = "notifications"
    default_auto_field = "django.db.models.BigAutoField"
