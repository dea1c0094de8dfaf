"""The ``manage.py gpupool`` dispatcher finds subcommands and reports unknown ones."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gpupool.cli.management.commands.gpupool import discover_subcommands


def test_subcommand_names_use_dashes() -> None:
    """Module ``seed_demo`` is exposed as ``seed-demo``; private modules are skipped."""
    names = list(discover_subcommands())
    assert all("_" not in name for name in names)
    assert names == sorted(names)


def test_unknown_subcommand_is_refused() -> None:
    """An unknown subcommand is an error, not a silent no-op."""
    with pytest.raises(CommandError):
        call_command("gpupool", "no-such-subcommand")
