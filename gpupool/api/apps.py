"""Django app configuration for ``gpupool.api``."""

from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The REST API's shared parts: errors, fields, filters, permissions."""

    name = "gpupool.api"
    label = "gpupool_api"

    def ready(self) -> None:
        """Word every text field's length refusal as the product does (``TOO_LONG``)."""
        from gpupool.api.errors import word_length_refusals

        word_length_refusals()
