"""``gpupool demo``: the living demo -- web server, control loop and workload generator.

    gpupool demo [--speed 60] [--load 1.0] [--seed 42] [--port 8000] [--celery]
    gpupool demo --generator-only [--seed 42] [--load 1.0]

Run ``migrate`` and ``gpupool seed-demo`` first (``make demo`` does all three): on a database
not migrated or holding no pool it starts nothing, says what to run and exits 2. The simulated
cluster's clock resumes where it stopped, at ``--speed`` simulated seconds per wall-clock
second (60: an hour of trace in a minute). Then three processes share the database, each as it
would run in production: ``runserver`` on 127.0.0.1, ``gpupool loop`` (the control loop on the
configured cluster, the simulated one by default) and the workload generator (this command
with ``--generator-only``), which submits the demo teams' work through the product as it falls
due. With ``--celery`` (``make demo-k8s``) Celery runs the loop instead of ``gpupool loop``,
on the broker of ``REDIS_URL``: beat, a worker of one process on the loop's queue and a worker
of the other tasks (what-if replays, roll-ups). Ctrl-C (or SIGTERM) stops all of them; if one
of them dies, the others are stopped and the command exits 1 naming it. Faults go in from
another terminal: ``gpupool sim ...``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS

from gpupool.cli.arguments import positive_float, positive_int
from gpupool.cli.signals import stop_on_signals
from gpupool.cli.subcommands.sim import clock_speed
from gpupool.clusters.simulated import Clock, ScaledClock
from gpupool.control.snapshot import CLUSTER_UNHEALTHY
from gpupool.inventory.actions import do_set_gpu_health
from gpupool.inventory.models import Gpu
from gpupool.simcluster.store import open_simulated_cluster, restart_clock

HELP = "Run the living demo: web server, control loop and workload generator (Ctrl-C stops)"

STOP_GRACE_S = 15.0
EXIT_CHILD_FAILED = 1
EXIT_UNPREPARED = 2  # the database is not migrated or seeded: nothing started
MAX_PORT = 65_535
MAX_LOAD = 100.0  # GPU-hours asked per hour, as a share of the pool's GPUs


def port_number(text: str) -> int:
    """``--port``: a TCP port, 1 to ``MAX_PORT``."""
    value = positive_int(text)
    if value > MAX_PORT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_PORT}, got {text.strip()}")
    return value


def load_share(text: str) -> float:
    """``--load``: above 0, at most ``MAX_LOAD`` times what the pool's GPUs can run."""
    value = positive_float(text)
    if value > MAX_LOAD:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_LOAD:g}, got {text.strip()}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--speed, --load, --seed, --port, --celery, --generator-only."""
    parser.add_argument(
        "--speed",
        type=clock_speed,
        default=60.0,
        help="simulated seconds per wall-clock second (default 60: an hour a minute; at most "
        "86400, a day a second)",
    )
    parser.add_argument(
        "--load",
        type=load_share,
        default=1.0,
        help="GPU-hours the teams ask per hour, as a share of the pool's GPUs (default 1.0, "
        "at most 100)",
    )
    parser.add_argument("--seed", type=int, default=42, help="the generator's seed")
    parser.add_argument(
        "--port", type=port_number, default=8000, help="the web server's port (1 to 65535)"
    )
    parser.add_argument(
        "--celery",
        action="store_true",
        help="run the loop as a Celery worker and beat on REDIS_URL instead of `gpupool loop`",
    )
    parser.add_argument(
        "--generator-only",
        action="store_true",
        help="run only the workload generator, in this process, until stopped",
    )


def demo_clock() -> Clock:
    """The clock the loop reads: the simulated cluster's (the wall clock on Kubernetes)."""
    if settings.GPUPOOL_CLUSTER == "simulated":
        return open_simulated_cluster().clock
    return ScaledClock(origin=0.0, wall_origin=0.0)  # the wall clock itself


def record_gpu_findings(broken: Mapping[str, Mapping[int, str]]) -> list[str]:
    """On the Kubernetes plane (``hack/demo_k8s.sh``), the demo's broken GPUs with their
    reasons, as a health source (DCGM's XIDs and health checks) would report them: the plane
    says only which GPUs its nodes do not offer (allocatable and the ``gpupool.io/unhealthy-gpus``
    label), so the sync alone would mark them with ``CLUSTER_UNHEALTHY``. Each GPU gpupool knows
    that is healthy, or marked only by the sync, gets its reason (``do_set_gpu_health``, by the
    system); one with a finding of its own keeps it. Returns ``node/index`` of those marked."""
    marked = []
    for name, reasons in broken.items():
        gpus = Gpu.objects.select_related("node").filter(node__name=name, index__in=list(reasons))
        for gpu in gpus.order_by("index"):
            if gpu.healthy or gpu.unhealthy_reason == CLUSTER_UNHEALTHY:
                do_set_gpu_health(gpu, healthy=False, reason=reasons[gpu.index], acting_user=None)
                marked.append(f"{name}/{gpu.index}")
    return marked


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Run the generator alone, or the three processes of the demo."""
    stop = threading.Event()  # set by SIGINT or SIGTERM; what the generator and supervisor poll
    stop_on_signals(stop)
    if options["generator_only"]:
        return _generator(options, stop, stdout)
    return _supervise(options, stop, stdout, stderr)


def _generator(options: dict[str, Any], stop: threading.Event, stdout: TextIO) -> int:
    from gpupool.simulation.demo_submissions import run_generator

    clock = demo_clock()
    speed = float(getattr(clock, "speed", 1.0))
    stdout.write(f"generator: seed {options['seed']}, load {options['load']:g}\n")
    stdout.flush()
    submitted = run_generator(
        clock, seed=options["seed"], load=options["load"], speed=speed, stop=stop.is_set
    )
    stdout.write(f"generator: stopped after {submitted} submissions\n")
    return 0


def _children(options: dict[str, Any]) -> dict[str, list[str]]:
    """The demo's processes by name. ``options["state"]`` is this demo's own folder
    (``_supervise`` makes it and removes it when the demo stops): Celery beat keeps its
    schedule there, so two demos on one machine never share one, and a demo never reads a
    stale one."""
    manage = str(Path(settings.BASE_DIR) / "manage.py")
    python = sys.executable
    celery = [python, "-m", "celery", "-A", "gpupool"]
    state = options.get("state") or Path(tempfile.gettempdir()) / f"gpupool-demo-{os.getpid()}"
    beat_schedule = Path(state) / "celerybeat-schedule"  # beat's bookkeeping
    loop = (
        {
            # The loop's queue in one process (its state stays warm), the rest in another.
            "scheduler": [
                *celery,
                "worker",
                "--loglevel=INFO",
                "--concurrency=1",
                f"--queues={settings.GPUPOOL_CYCLE_QUEUE}",
                "--hostname=scheduler@%h",
            ],
            "worker": [
                *celery,
                "worker",
                "--loglevel=INFO",
                "--concurrency=1",
                "--queues=celery",
                "--hostname=tasks@%h",
            ],
            "beat": [*celery, "beat", "--loglevel=INFO", f"--schedule={beat_schedule}"],
        }
        if options.get("celery")
        else {"loop": [python, manage, "gpupool", "loop"]}
    )
    return {
        "web": [python, manage, "runserver", f"127.0.0.1:{options['port']}", "--noreload"],
        **loop,
        "generator": [
            python, manage, "gpupool", "demo", "--generator-only",
            "--seed", str(options["seed"]), "--load", str(options["load"]),
        ],
    }  # fmt: skip


def _environment(options: dict[str, Any]) -> dict[str, str]:
    """The children's environment: this one's, with ``GPUPOOL_BASE_URL`` the demo's own web
    server unless set, so that the links in the mails the demo sends (a request to decide,
    a decision, a workload preempted) open its pages rather than read as bare paths."""
    environment = dict(os.environ)
    if not environment.get("GPUPOOL_BASE_URL"):
        environment["GPUPOOL_BASE_URL"] = f"http://127.0.0.1:{options['port']}"
    return environment


def unprepared(database: str = DEFAULT_DB_ALIAS) -> str | None:
    """Why the database cannot hold the demo yet, in the words that say what to run (None:
    it can): migrations not applied, or no demo pool seeded (no tenant)."""
    from django.db import connections
    from django.db.migrations.executor import MigrationExecutor

    from gpupool.tenancy.models import Tenant

    executor = MigrationExecutor(connections[database])
    waiting = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if waiting:
        return (
            f"the database is not migrated (migrations to apply: {len(waiting)}): run "
            "`python manage.py migrate` and `python manage.py gpupool seed-demo` first "
            "(`make demo` runs all three)"
        )
    if not Tenant.objects.using(database).exists():
        return (
            "the database holds no pool yet: run `python manage.py gpupool seed-demo` first "
            "(`make demo` runs it)"
        )
    return None


def _supervise(
    options: dict[str, Any], stop: threading.Event, stdout: TextIO, stderr: TextIO
) -> int:
    problem = unprepared()
    if problem is not None:
        stderr.write(f"demo: {problem}\n")
        return EXIT_UNPREPARED
    if options.get("celery") and not settings.REDIS_URL:
        stderr.write("demo: --celery needs a broker: set REDIS_URL\n")
        return EXIT_CHILD_FAILED
    if settings.GPUPOOL_CLUSTER == "simulated":
        clock = restart_clock(options["speed"])
        stdout.write(f"simulated cluster: speed {clock.speed:g} (an hour in "
                     f"{3600 / clock.speed:.0f} s)\n")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="gpupool-demo-") as state:
        return _run_children({**options, "state": Path(state)}, stop, stdout, stderr)


def _run_children(
    options: dict[str, Any], stop: threading.Event, stdout: TextIO, stderr: TextIO
) -> int:
    """Start the processes, wait for a stop or a death, and stop them all."""
    processes: dict[str, subprocess.Popen[bytes]] = {}
    environment = _environment(options)
    for name, command in _children(options).items():
        processes[name] = subprocess.Popen(command, env=environment)
    faults = (
        "faults: `python manage.py gpupool sim --help`"
        if settings.GPUPOOL_CLUSTER == "simulated"
        else "the cluster: kubectl with the plane's kubeconfig"
    )
    stdout.write(
        f"demo: http://127.0.0.1:{options['port']}/ (the login page names the demo users; "
        f"the admin site at /admin/); {faults}; Ctrl-C stops everything\n"
    )
    stdout.flush()
    failed = None
    while not stop.is_set():
        failed = next((n for n, p in processes.items() if p.poll() is not None), None)
        if failed is not None:
            break
        stop.wait(0.5)
    _stop_all(processes)
    if failed is not None:
        stderr.write(f"demo: the {failed} process exited ({processes[failed].returncode}); "
                     "the others were stopped\n")  # fmt: skip
        return EXIT_CHILD_FAILED
    stdout.write("demo: stopped\n")
    return 0


def _stop_all(processes: dict[str, subprocess.Popen[bytes]]) -> None:
    """SIGTERM to every child still running, SIGKILL to any still there after the grace."""
    for process in processes.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for process in processes.values():
        try:
            process.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
