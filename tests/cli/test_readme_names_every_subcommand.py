"""README.md lists every subcommand of ``manage.py gpupool`` (the modules its ``--help``
offers, ``discover_subcommands``), and none that is not one."""

from __future__ import annotations

import re
from pathlib import Path

from gpupool.cli.management.commands.gpupool import discover_subcommands

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_subcommands() -> set[str]:
    """The subcommands the README's sentence about ``manage.py gpupool <subcommand>`` names."""
    text = README.read_text()
    start = text.index("`manage.py gpupool <subcommand> --help` documents each subcommand")
    sentence = text[start : text.index(".\n", start)]
    return set(re.findall(r"`([a-z][a-z-]*)`", sentence.split(":", 1)[1]))


def test_the_readme_names_every_subcommand_of_manage_py_gpupool() -> None:
    assert readme_subcommands() == set(discover_subcommands())
