"""Django app configuration for ``gpupool.control``."""

from django.apps import AppConfig


class ControlConfig(AppConfig):
    """Scheduling cycle records and the health endpoint."""

    name = "gpupool.control"
    label = "control"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Celery's app is made current when ``gpupool.celery`` is imported: a worker does it
        # (``-A gpupool``), and so must every other process that sends tasks (the web server's
        # what-if runs), or ``.delay()`` goes to Celery's default app, amqp on localhost.
        # Not in ``gpupool/__init__.py``: the decision core is imported without Django.
        import gpupool.celery  # noqa: F401
