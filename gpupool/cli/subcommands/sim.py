"""``gpupool sim ...``: look at the simulated cluster, and break it on purpose.

The demo's cluster lives in the database (``gpupool.simcluster``); these commands act on it
as a person with ``kubectl`` and a screwdriver would on a real one, never through the
control loop (which only sees the consequences, through the backend protocol):

    gpupool sim status                     nodes (Ready, cordoned, broken GPUs), pods by phase
    gpupool sim node-down NODE             the node's kubelet stops: NotReady, tainted, and
                                           its pods are deleted 300 simulated seconds later
    gpupool sim node-up NODE               ... and comes back
    gpupool sim gpu-fail NODE INDEX [--reason TEXT]   a GPU fails; the pod using it fails
    gpupool sim gpu-heal NODE INDEX        the GPU is healthy again
    gpupool sim cordon NODE / uncordon NODE
    gpupool sim clock [--speed S]          the simulated time; --speed resumes it at S
                                           (above 0, at most a simulated day a second)

Every action refuses (exit status 2) when the configured cluster (``GPUPOOL_CLUSTER``) is not
the simulated one. A clock stored out of range (by a speed no longer taken) is shown as such,
and ``gpupool sim clock --speed S`` restarts it from the wall clock's time.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any, TextIO

from django.conf import settings

from gpupool.cli.arguments import positive_float
from gpupool.clusters.api_objects import format_time
from gpupool.clusters.base import SCHEDULER_NAME
from gpupool.clusters.simulated import Clock
from gpupool.number_formats import counted
from gpupool.simcluster.store import (
    clock_of,
    cluster_state,
    open_simulated_cluster,
    restart_clock,
    speed_error,
    time_in_range,
)

HELP = "Show the simulated cluster, or inject faults: node-down/up, gpu-fail/heal, cordon"

EXIT_INVALID = 2


def clock_speed(text: str) -> float:
    """``--speed``: a finite number above 0, at most the store's ``MAX_SPEED``."""
    value = positive_float(text)
    error = speed_error(value)
    if error is not None:
        raise argparse.ArgumentTypeError(f"{error}, got {text.strip()}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One action per fault, plus status and clock."""
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    actions.add_parser("status", help="nodes, broken GPUs and pods by phase")
    for name, what in (
        ("node-down", "the node's kubelet stops reporting (NotReady)"),
        ("node-up", "the node reports Ready again"),
        ("cordon", "mark the node unschedulable"),
        ("uncordon", "mark the node schedulable"),
    ):
        actions.add_parser(name, help=what).add_argument("node")
    for name, what in (("gpu-fail", "a GPU fails"), ("gpu-heal", "a GPU is healthy again")):
        action = actions.add_parser(name, help=what)
        action.add_argument("node")
        action.add_argument("index", type=int, help="the GPU's index on the node")
        if name == "gpu-fail":
            action.add_argument("--reason", default="XID 79: the GPU has fallen off the bus")
    clock = actions.add_parser("clock", help="show the simulated time, or set its speed")
    clock.add_argument(
        "--speed",
        type=clock_speed,
        help="simulated seconds per wall-clock second from now on (60: an hour a minute; at "
        "most 86400, a day a second)",
    )


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Do the action; an unknown node or GPU exits 2 saying so, and so does every action
    when the configured cluster is not the simulated one (there is nothing here to show or
    break)."""
    action = options["action"]
    if settings.GPUPOOL_CLUSTER != "simulated":
        stderr.write(
            f"gpupool sim {action}: the configured cluster is {settings.GPUPOOL_CLUSTER!r} "
            "(GPUPOOL_CLUSTER), not the simulated one; `gpupool sim` acts only on the "
            "simulated cluster. On Kubernetes, faults go in through the cluster's API "
            "(kubectl cordon, a node's Ready condition: docs/kubernetes-testenv.md)\n"
        )
        return EXIT_INVALID
    if action == "status":
        _status(stdout)
        return 0
    if action == "clock":
        if options.get("speed") is not None:
            try:
                restart_clock(options["speed"])
            except ValueError as error:  # a speed given past the parser (call_command)
                stderr.write(f"gpupool sim clock: {error}\n")
                return EXIT_INVALID
        clock = clock_of(cluster_state())
        stdout.write(f"simulated time {_time_of(clock)}, speed {clock.speed:g}\n")
        return 0
    cluster = open_simulated_cluster()
    node = options["node"]
    try:
        if action in ("node-down", "node-up"):
            cluster.set_node_ready(node, action == "node-up")
        elif action in ("cordon", "uncordon"):
            cluster.cordon(node, action == "cordon")
        else:
            healthy = action == "gpu-heal"
            cluster.set_gpu_health(node, options["index"], healthy, options.get("reason", ""))
            if not healthy:  # its reason, as a health source tells it (the demo's seeded ones)
                from gpupool.cli.subcommands.demo import record_gpu_findings  # demo imports sim

                record_gpu_findings({node: {options["index"]: options.get("reason", "")}})
    except (KeyError, ValueError) as error:
        stderr.write(f"gpupool sim {action}: {error.args[0]}\n")
        return EXIT_INVALID
    stdout.write(f"{action} {node}" + (f" GPU {options['index']}" if "index" in options else ""))
    stdout.write("\n")
    return 0


def _time_of(clock: Clock) -> str:
    """The clock's time, or why it has none: one stored out of range survives being shown."""
    now = clock.now()
    if time_in_range(now):
        return format_time(now)
    return f"out of range ({now:g} s); `gpupool sim clock --speed S` restarts it from now"


def _status(stdout: TextIO) -> None:
    cluster = open_simulated_cluster()
    stdout.write(f"simulated time {_time_of(cluster.clock)}\n")
    nodes = cluster.nodes()
    pods = cluster.pods()
    on_node = Counter(p.node_name for p in pods if p.node_name and not p.finished)
    for node in nodes:
        flags = [] if node.ready else ["NotReady"]
        if node.unschedulable:
            flags.append("cordoned")
        broken = cluster.unhealthy_gpus(node.name)
        flags += [f"GPU {index} unhealthy ({why})" for index, why in sorted(broken.items())]
        if flags or on_node[node.name]:
            state = ", ".join(flags) or "Ready"
            pods_here = counted(on_node[node.name], "pod")
            stdout.write(f"  {node.name:<16} {pods_here:>8}  {state}\n")
    ours = Counter(p.phase for p in pods if p.scheduler_name == SCHEDULER_NAME)
    others = sum(1 for p in pods if p.scheduler_name != SCHEDULER_NAME)
    phases = ", ".join(f"{count} {phase}" for phase, count in sorted(ours.items())) or "none"
    stdout.write(
        f"{counted(len(nodes), 'node')}; gpupool's pods: {phases}; other schedulers': {others}\n"
    )
