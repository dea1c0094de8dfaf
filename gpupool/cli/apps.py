"""The ``gpupool`` management command and its subcommands."""

from django.apps import AppConfig


class CliConfig(AppConfig):
    """Hosts ``python manage.py gpupool <subcommand>``."""

    name = "gpupool.cli"
    label = "gpupool_cli"
