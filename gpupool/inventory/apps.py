"""Django app configuration for ``gpupool.inventory``."""

from django.apps import AppConfig


class InventoryConfig(AppConfig):
    """Flavors, nodes and their GPUs."""

    name = "gpupool.inventory"
    label = "inventory"
    default_auto_field = "django.db.models.BigAutoField"
