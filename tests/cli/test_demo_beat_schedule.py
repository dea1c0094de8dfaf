"""`gpupool demo --celery`: Celery beat keeps its schedule in the demo's own folder, made when
the demo starts and removed when it stops, so two demos on one machine never share a schedule
file and a demo never reads a stale one (every demo used ``/tmp/gpupool-demo-celerybeat``)."""

from __future__ import annotations

import sys
import threading
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from domain_builders import tenant

from gpupool.cli.subcommands import demo

pytestmark = pytest.mark.django_db

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]
OPTIONS = {"speed": 30.0, "load": 1.0, "seed": 42, "port": 8000, "generator_only": False}


def run_demo(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the Celery demo with every process a sleeper; the beat schedule it was given, which
    beat's folder held while the demo ran."""
    popen = demo.subprocess.Popen
    schedules: list[Path] = []

    def started(command: list[str], **options: Any) -> Any:
        given = [part.removeprefix("--schedule=") for part in command if "--schedule=" in part]
        if given:
            schedules.append(Path(given[0]))
            assert schedules[-1].parent.is_dir()  # beat can write it
        return popen(SLEEPER, **options)

    monkeypatch.setattr(demo.subprocess, "Popen", started)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    assert demo._supervise({**OPTIONS, "celery": True}, stop, StringIO(), StringIO()) == 0
    assert len(schedules) == 1
    return schedules[0]


def test_each_demo_has_its_own_beat_schedule_removed_when_it_stops(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:6379/5"
    tenant("nlp")  # a pool, as seed-demo leaves it: the demo starts nothing without one
    first = run_demo(monkeypatch)
    second = run_demo(monkeypatch)
    assert first.parent != second.parent
    assert not first.parent.exists() and not second.parent.exists()
