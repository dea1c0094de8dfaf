"""``gpupool.wsgi`` loads the project's URLs and freezes what it loaded, so the cyclic
collector's full passes in a web worker skip the objects the process keeps until it exits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import gc, sys
import gpupool.wsgi
frozen = gc.get_freeze_count()
loaded = "gpupool.workloads.api" in sys.modules and "gpupool.accounting.reports_api" in sys.modules
print(frozen, loaded, len(gc.get_objects()))
"""


def test_the_wsgi_application_freezes_the_loaded_project() -> None:
    environment = {**os.environ, "DEBUG": "0", "SECRET_KEY": "wsgi-test-not-a-secret"}
    environment.pop("DJANGO_SETTINGS_MODULE", None)
    answer = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    frozen, loaded, tracked = answer.stdout.split()
    assert loaded == "True"  # the URLs (and so the API's views) were loaded before freezing
    assert int(frozen) > 50_000  # the loaded project, out of the collector's sight
    assert int(tracked) < int(frozen) // 10  # little is left for the collector to walk
