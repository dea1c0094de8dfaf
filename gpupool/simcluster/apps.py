"""Django app configuration for ``gpupool.simcluster``."""

from django.apps import AppConfig


class SimclusterConfig(AppConfig):
    """Storage of the simulated cluster (the embedded stand-in for a Kubernetes cluster)."""

    name = "gpupool.simcluster"
    label = "simcluster"
    default_auto_field = "django.db.models.BigAutoField"
