"""`gpupool demo` supervises its three processes: one stop stops all, one death stops all."""

from __future__ import annotations

import sys
import threading
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from domain_builders import tenant

from gpupool.cli.subcommands import demo
from gpupool.simcluster.models import SimulatedClusterState
from gpupool.simcluster.store import cluster_state

pytestmark = pytest.mark.django_db

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]
OPTIONS = {"speed": 30.0, "load": 1.0, "seed": 42, "port": 8000, "generator_only": False}


@pytest.fixture
def a_pool() -> None:
    """A migrated database holding a pool (as seed-demo leaves it: a tenant at least), which
    the demo needs before it starts anything."""
    tenant("nlp")


def test_a_database_with_no_pool_starts_nothing_and_says_what_to_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(demo.subprocess, "Popen", lambda command: pytest.fail("started"))
    err = StringIO()
    code = demo._supervise(OPTIONS, threading.Event(), StringIO(), err)
    assert code == demo.EXIT_UNPREPARED == 2
    assert "run `python manage.py gpupool seed-demo` first" in err.getvalue()


def test_an_unmigrated_database_starts_nothing_and_says_what_to_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from django.db.migrations.executor import MigrationExecutor

    leaves = MigrationExecutor.migration_plan
    monkeypatch.setattr(  # as if the newest migration were not applied yet
        MigrationExecutor,
        "migration_plan",
        lambda self, targets, clean_start=False: (
            [("a migration", False)]
            if targets == self.loader.graph.leaf_nodes()
            else leaves(self, targets, clean_start)
        ),
    )
    monkeypatch.setattr(demo.subprocess, "Popen", lambda command: pytest.fail("started"))
    err = StringIO()
    assert demo._supervise(OPTIONS, threading.Event(), StringIO(), err) == 2
    assert "the database is not migrated (migrations to apply: 1)" in err.getvalue()


def test_the_commands_are_the_server_the_loop_and_the_generator() -> None:
    commands = demo._children(OPTIONS)
    assert commands["web"][2:] == ["runserver", "127.0.0.1:8000", "--noreload"]
    assert commands["loop"][2:] == ["gpupool", "loop"]
    assert commands["generator"][2:] == [
        "gpupool", "demo", "--generator-only", "--seed", "42", "--load", "1.0",
    ]  # fmt: skip


def test_with_celery_workers_and_beat_run_the_loop_instead_of_gpupool_loop() -> None:
    commands = demo._children({**OPTIONS, "celery": True})
    assert set(commands) == {"web", "scheduler", "worker", "beat", "generator"}
    for name in ("scheduler", "worker", "beat"):
        assert commands[name][1:5] == ["-m", "celery", "-A", "gpupool"], name
    assert commands["scheduler"][5] == commands["worker"][5] == "worker"
    assert commands["beat"][5] == "beat"
    # The loop's queue in one process of its own; every other task in the other worker.
    assert {"--queues=cycle", "--concurrency=1"} <= set(commands["scheduler"])
    assert "--queues=celery" in commands["worker"]


def test_with_celery_and_no_broker_the_demo_refuses_to_start(
    settings: Any, monkeypatch: pytest.MonkeyPatch, a_pool: None
) -> None:
    settings.REDIS_URL = ""
    monkeypatch.setattr(demo.subprocess, "Popen", lambda command: pytest.fail("started"))
    err = StringIO()
    code = demo._supervise({**OPTIONS, "celery": True}, threading.Event(), StringIO(), err)
    assert code == demo.EXIT_CHILD_FAILED and "REDIS_URL" in err.getvalue()


def test_a_stop_stops_every_process_and_sets_the_clock(
    monkeypatch: pytest.MonkeyPatch, a_pool: None
) -> None:
    started: list[Any] = []
    popen = demo.subprocess.Popen

    def tracked(command: list[str], **options: Any) -> Any:
        started.append(popen(command, **options))
        return started[-1]

    monkeypatch.setattr(demo, "_children", lambda options: dict.fromkeys(("a", "b"), SLEEPER))
    monkeypatch.setattr(demo.subprocess, "Popen", tracked)
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()
    out = StringIO()

    assert demo._supervise(OPTIONS, stop, out, StringIO()) == 0

    assert len(started) == 2 and all(p.returncode is not None for p in started)
    assert cluster_state().speed == 30.0 and "stopped" in out.getvalue()
    # the banner sends people to the dashboard, and to faults the simulated cluster takes
    assert "http://127.0.0.1:8000/ (the login page names the demo users" in out.getvalue()
    assert "gpupool sim --help" in out.getvalue()


def test_a_process_that_dies_stops_the_others_and_is_named(
    monkeypatch: pytest.MonkeyPatch, a_pool: None
) -> None:
    dying = [sys.executable, "-c", "raise SystemExit(3)"]
    monkeypatch.setattr(demo, "_children", lambda options: {"loop": dying, "web": SLEEPER})
    err = StringIO()

    assert demo._supervise(OPTIONS, threading.Event(), StringIO(), err) == 1

    assert "the loop process exited (3)" in err.getvalue()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "99999"], "argument --port: must be at most 65535, got 99999"),
        (["--port", "0"], "argument --port: must be at least 1, got 0"),
        (["--port", "-80"], "argument --port: must be at least 1, got -80"),
        (["--speed", "1e308"], "argument --speed: must be at most 86400"),
        (["--load", "1e308"], "argument --load: must be at most 100, got 1e308"),
    ],
)
def test_bad_values_are_refused_by_option_before_anything_starts(
    args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(demo, "_generator", lambda *a: pytest.fail("the generator started"))
    monkeypatch.setattr(demo, "_supervise", lambda *a: pytest.fail("the demo started"))
    with pytest.raises(CommandError, match=message):
        call_command("gpupool", "demo", *args, "--generator-only", stdout=StringIO())
    with pytest.raises(CommandError, match=message):
        call_command("gpupool", "demo", *args, stdout=StringIO())
    assert not SimulatedClusterState.objects.exists()  # no clock was set


@pytest.mark.parametrize(
    ("given", "seen"),
    [
        (None, "http://127.0.0.1:8000"),
        ("https://gpupool.example.org", "https://gpupool.example.org"),
    ],
    ids=["the demo's server when unset", "the one set when set"],
)
def test_the_processes_link_their_mails_to_the_demos_server(
    monkeypatch: pytest.MonkeyPatch, a_pool: None, tmp_path: Any, given: str | None, seen: str
) -> None:
    """The mails the demo's processes send link to its pages (``notify.link``): without
    ``GPUPOOL_BASE_URL`` their links were bare paths (``/approvals/2/``)."""
    if given is None:
        monkeypatch.delenv("GPUPOOL_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("GPUPOOL_BASE_URL", given)
    said = tmp_path / "base-url"
    child = [
        sys.executable,
        "-c",
        "import os, pathlib, sys, time; "
        "pathlib.Path(sys.argv[1]).write_text(os.environ.get('GPUPOOL_BASE_URL', '-')); "
        "time.sleep(120)",
        str(said),
    ]
    monkeypatch.setattr(demo, "_children", lambda options: {"web": child})
    stop = threading.Event()
    threading.Timer(3.0, stop.set).start()

    assert demo._supervise(OPTIONS, stop, StringIO(), StringIO()) == 0

    assert said.read_text() == seen
