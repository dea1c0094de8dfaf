"""``python manage.py gpupool <subcommand>``: the operator's command line."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from types import ModuleType
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from gpupool.cli import subcommands


def discover_subcommands() -> dict[str, ModuleType]:
    """Return the subcommand modules keyed by their command name, sorted."""
    found: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(subcommands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{subcommands.__name__}.{info.name}")
        found[info.name.replace("_", "-")] = module
    return found


class Command(BaseCommand):
    """Dispatch to one of the modules in ``gpupool.cli.subcommands``."""

    help = "gpupool operations: plan, bench, simulate, seed-demo, ..."

    def add_arguments(self, parser: CommandParser) -> None:
        """Register one sub-parser per subcommand module."""
        sub = parser.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
        sub.required = True
        for name, module in discover_subcommands().items():
            child = sub.add_parser(
                name,
                help=getattr(module, "HELP", ""),
                formatter_class=argparse.RawDescriptionHelpFormatter,
            )
            module.add_arguments(child)
            child.set_defaults(_module=module)

    def handle(self, *args: Any, **options: Any) -> None:
        """Run the chosen subcommand; a non-zero status is the process's exit status."""
        module: ModuleType = options.pop("_module")
        try:
            status = module.run(options, self.stdout, self.stderr)
        except BrokenPipeError:  # `... | head`: the reader left; no traceback for it
            from gpupool.client.main import reader_gone

            raise SystemExit(reader_gone(sys.stdout)) from None
        if status:
            raise SystemExit(status)
