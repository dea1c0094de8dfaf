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
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any, TextIO

from gpupool.cli.arguments import positive_float
from gpupool.clusters.api_objects import format_time
from gpupool.clusters.base import SCHEDULER_NAME
from gpupool.simcluster.store import clock_of, cluster_state, open_simulated_cluster, restart_clock

HELP = "Show the simulated cluster, or inject faults: node-down/up, gpu-fail/heal, cordon"

EXIT_INVALID = 2


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
        type=positive_float,
        help="simulated seconds per wall-clock second from now on (60: an hour a minute)",
    )


def run(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Do the action; an unknown node or GPU exits 2 saying so."""
    action = options["action"]
    if action == "status":
        _status(stdout)
        return 0
    if action == "clock":
        state = cluster_state()
        if options.get("speed"):
            restart_clock(options["speed"])
            state = cluster_state()
        clock = clock_of(state)
        stdout.write(f"simulated time {format_time(clock.now())}, speed {clock.speed:g}\n")
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
    except (KeyError, ValueError) as error:
        stderr.write(f"gpupool sim {action}: {error.args[0]}\n")
        return EXIT_INVALID
    stdout.write(f"{action} {node}" + (f" GPU {options['index']}" if "index" in options else ""))
    stdout.write("\n")
    return 0


def _status(stdout: TextIO) -> None:
    cluster = open_simulated_cluster()
    stdout.write(f"simulated time {format_time(cluster.clock.now())}\n")
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
            stdout.write(f"  {node.name:<16} {on_node[node.name]:>3} pods  {state}\n")
    ours = Counter(p.phase for p in pods if p.scheduler_name == SCHEDULER_NAME)
    others = sum(1 for p in pods if p.scheduler_name != SCHEDULER_NAME)
    phases = ", ".join(f"{count} {phase}" for phase, count in sorted(ours.items())) or "none"
    stdout.write(f"{len(nodes)} nodes; gpupool's pods: {phases}; other schedulers': {others}\n")
