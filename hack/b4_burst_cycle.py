"""The first cycle of a burst against the local plane: where its wall clock and its statements go.

B4 run 1 loses its client allowance at the burst's start, while the loop's first cycles run
(``docs/benchmarks.md`` B4). This harness measures those cycles alone, cheaper than a full B4
run: the control loop on the Kubernetes backend (the plane's 500 KWOK nodes, the benchmark's
pool), an idle pool, then ``--sizes`` bursts of one-GPU pods made at once; each burst's first
cycle is timed (wall and CPU), its SQL statements counted by the loop's step that sent them,
and with ``--profile`` profiled in wall time. Between bursts the pods are bound (the cycles
after), deleted, and the loop settles.

    make k8s-up K8S_UP_ARGS="--profile b4 --no-scheduler"
    DATABASE_URL=postgres://gpupool:gpupool@127.0.0.1:5432/gpupool_b4burst_hack \\
      .venv/bin/python hack/b4_burst_cycle.py --sizes 8,64,256 --repeat 3 [--profile out]

The database is migrated and flushed first (its rows are the harness's). Prints one line a
cycle and, with ``--json``, the figures as JSON at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import statistics
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

LOOP_FILE = str(ROOT / "gpupool" / "control" / "loop.py")
GPUPOOL_DIR = str(ROOT / "gpupool")


class Statements:
    """Counts the statements sent while on, by the loop's method that sent them (the
    innermost frame of ``loop.py``) and the innermost gpupool function."""

    def __init__(self) -> None:
        self.on = False
        self.by_step: Counter[str] = Counter()
        self.by_site: Counter[str] = Counter()
        self.total = 0
        self.seconds = 0.0  # the statements' wall time (sending, the server, the answer)
        self.site_s: Counter[str] = Counter()

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if self.on:
            self.total += 1
            step, site = "?", "?"
            frame = sys._getframe(1)
            while frame is not None:
                path = frame.f_code.co_filename
                if site == "?" and path.startswith(GPUPOOL_DIR):
                    site = f"{Path(path).stem}.{frame.f_code.co_name}"
                if path == LOOP_FILE:
                    step = frame.f_code.co_name
                    break
                frame = frame.f_back  # type: ignore[assignment]
            self.by_step[step] += 1
            self.by_site[f"{step} <- {site}"] += 1
            clock = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                spent = time.perf_counter() - clock
                self.seconds += spent
                self.site_s[f"{step} <- {site}"] += spent
        return execute(sql, params, many, context)

    def reset(self) -> None:
        self.by_step.clear()
        self.by_site.clear()
        self.site_s.clear()
        self.total = 0
        self.seconds = 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", type=Path, default=ROOT / ".k8s" / "kubeconfig")
    parser.add_argument("--sizes", default="8,64,256")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--qps", type=float, default=100.0)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--profile", default="", help="cProfile (wall) of the first cycles")
    parser.add_argument("--profile-cpu", action="store_true", help="profile CPU time, not wall")
    parser.add_argument("--sites", type=int, default=0, help="print the N busiest call sites")
    parser.add_argument(
        "--idle",
        type=float,
        default=0.0,
        help="after the inventory, do what the runner does after a cycle (estimates, roll-up) "
        "and wait this long before the first burst, as the loop meets B4's burst",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("SECRET_KEY", "b4-burst-cycle-harness-only-not-a-secret-0123456789")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from benchmarks import b4_binding as b4
    from gpupool.clusters.kubernetes import KubernetesBackend
    from gpupool.control.loop import ControlLoop

    if connection.vendor != "postgresql":
        raise SystemExit("run it on PostgreSQL (DATABASE_URL)")
    call_command("migrate", verbosity=0)
    call_command("flush", interactive=False, verbosity=0)
    setup = b4.Setup(kubeconfig=args.kubeconfig.resolve(), qps=args.qps, burst=args.burst)
    api = b4.api_client(setup.kubeconfig, pool=16)
    b4.ensure_namespace(api, setup.namespace)
    b4.clear_pods(api, setup.namespace)
    sizes = [int(s) for s in args.sizes.split(",")]
    b4.seed_pool(setup.namespace, setup.product, 4000)
    backend = KubernetesBackend.connect(str(setup.kubeconfig), qps=args.qps, burst=args.burst)
    loop = ControlLoop(backend)
    statements = Statements()
    profile = cProfile.Profile(time.process_time if args.profile_cpu else time.perf_counter)
    figures: dict[str, list[dict[str, Any]]] = {}

    def cycle(label: str, *, profiled: bool = False) -> dict[str, Any]:
        statements.reset()
        statements.on = True
        wall, cpu = time.perf_counter(), time.process_time()
        if profiled:
            profile.enable()
        try:
            result = loop.run_cycle(pipeline=True)
        finally:
            if profiled:
                profile.disable()
            statements.on = False
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        line = {
            "label": label,
            "status": result.status,
            "wall_ms": round(1000 * wall, 1),
            "cpu_ms": round(1000 * cpu, 1),
            "phases_ms": {k: round(1000 * v, 1) for k, v in result.timings.items()},
            "statements": statements.total,
            "statements_ms": round(1000 * statements.seconds, 1),
            "by_step": dict(statements.by_step.most_common()),
            "admitted": result.counts.get("admitted", 0),
            "handed_on": result.counts.get("handed_on", 0),
        }
        print(json.dumps(line), flush=True)
        if result.error:
            print(result.error, file=sys.stderr, flush=True)
        if args.sites and profiled:
            for site, count in statements.by_site.most_common(args.sites):
                spent = 1000 * statements.site_s[site]
                print(f"    {count:4d} {spent:6.1f} ms {site}", flush=True)
        return line

    with connection.execute_wrapper(statements):
        try:
            cycle("inventory")
            loop.finish_apply()
            if args.idle:
                from gpupool.control import runner

                loop.refresh_estimates()
                runner.roll_up_usage(loop)
                runner.prune_activity(loop)
                time.sleep(args.idle)
                runner.fresh_connections()
            for size in sizes:
                for trial in range(args.repeat):
                    pods = b4.manifests(b4.GPUPOOL, "single", size, 1, setup)
                    for pod in pods:  # names of their own: ended workloads keep theirs
                        pod["metadata"]["name"] = f"b{size}-{trial}-{pod['metadata']['name']}"
                    b4.create_all(api, setup.namespace, pods, 8)
                    deadline = time.monotonic() + 30
                    while backend.arrivals().count < size and time.monotonic() < deadline:
                        time.sleep(0.01)
                    first = cycle(f"burst {size} #{trial}: first", profiled=bool(args.profile))
                    figures.setdefault(str(size), []).append(first)
                    loop.finish_apply()  # the bindings, as the next cycle would wait for them
                    after = cycle(f"burst {size} #{trial}: next")
                    figures.setdefault(f"{size} next", []).append(after)
                    loop.finish_apply()
                    b4.clear_pods(api, setup.namespace)
                    for _ in range(3):
                        time.sleep(0.3)
                        cycle("settle")
                        loop.finish_apply()
        except Exception:
            traceback.print_exc()
            return 1
        finally:
            loop.close()
            b4.clear_pods(api, setup.namespace)
            api.close()
    if args.profile:
        profile.dump_stats(f"{args.profile}-first.prof")
    summary = {
        key: {
            "wall_ms_median": statistics.median(x["wall_ms"] for x in lines),
            "cpu_ms_median": statistics.median(x["cpu_ms"] for x in lines),
            "statements_median": statistics.median(x["statements"] for x in lines),
            "statements_ms_median": statistics.median(x["statements_ms"] for x in lines),
            "phases_ms_median": {
                phase: statistics.median(x["phases_ms"].get(phase, 0.0) for x in lines)
                for phase in ("sync", "snapshot", "plan", "record", "apply")
            },
        }
        for key, lines in figures.items()
    }
    print(json.dumps({"load_1m": os.getloadavg()[0], "summary": summary}, indent=1))
    if args.json:
        print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
