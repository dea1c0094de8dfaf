"""The decision core stays pure: importing it pulls in no Django, Celery or Kubernetes."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import importlib, pkgutil, sys
import gpupool.scheduler as core
for info in pkgutil.iter_modules(core.__path__):
    importlib.import_module(f"gpupool.scheduler.{info.name}")
print(",".join(m for m in ("django", "celery", "kubernetes", "rest_framework") if m in sys.modules))
"""


def test_importing_the_core_loads_no_framework() -> None:
    """A fresh interpreter importing every gpupool.scheduler module has no framework loaded."""
    out = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ""
