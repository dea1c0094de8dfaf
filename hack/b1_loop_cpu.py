"""B1-loop's cycles with each phase timed in process CPU seconds (a developer's harness).

On a shared machine a cycle's wall clock measures the other processes as much as the loop;
this runs the benchmark's pool (``control.bench``: the same load, cluster and steady
submissions) and times the loop's phases with ``time.process_time`` in place of the wall
clock. Everything runs in one transaction that is rolled back, so the database (migrated,
empty) can be reused; ``--commit`` commits every cycle as the loop does (the database is used
up), which the state's horizon needs to move on (the figures of B1-loop round 3). Prints
one line per cycle: its CPU, its phases' CPU and its counts.

    DATABASE_URL=postgres://.../gpupool_bench GPUPOOL_UTILIZATION_SOURCE=none \\
        python hack/b1_loop_cpu.py --steady 5 [--profile out]

``--profile out`` also writes cProfile data (CPU time) of the first cycle to ``out-first.prof``
and of the steady cycles from ``--profile-from`` (2 by default) on to ``out-steady.prof``.

``--statements`` prints, for each cycle's record (``do_record_cycle``), the workload row
versions its ``UPDATE``s wrote, its statements (``COPY`` included) and the slowest of them in
wall-clock time; with ``--commit`` the deferred foreign-key checks are run apart, just before
the commit (``SET CONSTRAINTS ALL IMMEDIATE``), and timed, then the commit itself. It also
prints the CPU the PostgreSQL backend serving the connection spent on the record (its
``/proc/<pid>/stat``, ``pg_backend_pid()``; the database runs on this machine): the record's
cost is mostly the server's, which the process's own CPU does not show.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import random
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")


class _Done(Exception):
    """Leaves the outer transaction, undone."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steady", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", default="")
    parser.add_argument(
        "--profile-from",
        type=int,
        default=2,
        help="the first steady cycle profiled (with --profile): steady 0 is the first cycle's "
        "starts, not a steady cycle's work",
    )
    parser.add_argument(
        "--commit",
        action="store_true",
        help="commit each cycle as the loop does (an empty database, used up): inside one "
        "outer transaction the state's horizon never passes that transaction's start, so "
        "every refresh finds every row changed since the load",
    )
    parser.add_argument(
        "--profile-wall",
        action="store_true",
        help="profile in wall-clock time (the database's answers included) instead of CPU",
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="time each statement of the record (wall clock) and count its row versions",
    )
    parser.add_argument(
        "--every-statement",
        action="store_true",
        help="with --statements: print every statement of the record in order, not the 8 slowest",
    )
    args = parser.parse_args()

    import django

    django.setup()
    from django.db import transaction

    import gpupool.control.loop as loop_module
    from gpupool.control import bench
    from gpupool.control.actions import do_load_pool
    from gpupool.control.loop import ControlLoop
    from gpupool.simulation.scale_pool import synthetic_snapshot

    if args.statements:
        _time_statements(loop_module, commit=args.commit, every=args.every_statement)
    # The loop times its phases with ``time.perf_counter``: CPU seconds here instead.
    cpu_clock = types.SimpleNamespace(
        perf_counter=time.process_time, monotonic=time.monotonic, thread_time=time.thread_time
    )
    setattr(loop_module, "time", cpu_clock)  # noqa: B010
    profile_clock = time.perf_counter if args.profile_wall else time.process_time
    first_profile = cProfile.Profile(profile_clock)
    steady_profile = cProfile.Profile(profile_clock)
    outer = contextlib.nullcontext() if args.commit else transaction.atomic()
    try:
        with outer:
            snapshot, policy, now = synthetic_snapshot(args.nodes, args.seed)
            manifests = bench.node_manifests(snapshot)
            do_load_pool(
                snapshot,
                at=bench._moment(now),
                node_labels=bench.node_labels(),
                labels_of_node={m["metadata"]["name"]: m["metadata"]["labels"] for m in manifests},
            )
            backend = bench.simulated_cluster(snapshot, now, manifests)
            loop = ControlLoop(backend, policy=policy)
            rng = random.Random(args.seed)
            clock = backend.cluster.clock  # type: ignore[attr-defined]
            for index in range(-1, args.steady):
                if index >= 0:
                    clock.advance(bench.STEP_S)
                    count = max(len(snapshot.workloads) // 200, 1)
                    bench._submit(rng, count, bench._moment(clock.now()))
                profile = first_profile if index < 0 else steady_profile
                profiled = bool(args.profile) and (index < 0 or index >= args.profile_from)
                started, wall = time.process_time(), time.perf_counter()
                if profiled:
                    profile.enable()
                result = loop.run_cycle()
                if profiled:
                    profile.disable()
                cpu = time.process_time() - started
                wall = time.perf_counter() - wall
                plan = result.timings.get("plan", 0.0)
                print(
                    "first" if index < 0 else f"steady {index}",
                    result.status,
                    result.error[:200],
                    f"wall {wall:.3f} cpu {cpu:.3f} plan {plan:.3f} rest {cpu - plan:.3f}",
                    {k: round(v, 3) for k, v in result.timings.items()},
                    result.counts,
                    flush=True,
                )
            loop.close()
            raise _Done
    except _Done:
        pass
    if args.profile:
        first_profile.dump_stats(f"{args.profile}-first.prof")
        steady_profile.dump_stats(f"{args.profile}-steady.prof")


def _time_statements(loop_module: types.ModuleType, *, commit: bool, every: bool) -> None:
    """Wrap the loop's ``do_record_cycle`` so that it prints its statements (``--statements``)."""
    from django.db import connection, transaction

    import gpupool.bulk as bulk
    import gpupool.control.actions as actions

    record_cycle = loop_module.do_record_cycle
    copy_rows = bulk.copy_rows
    overlapped = actions.overlapped
    timed: list[tuple[float, str]] = []
    piped = [False]

    def versions() -> tuple[int, int]:
        # The workload table's row versions written by this transaction so far (an update
        # sent in a pipeline has no row count of its own), and how many of them were HOT
        # (heap-only: no index entry written).
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables WHERE relname = %s",
                ["workloads_workload"],
            )
            timed.pop()  # not one of the record's statements
            upd, hot = cursor.fetchone()
            return int(upd), int(hot)

    def statement(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        # An UPDATE of workload rows outside a pipeline is followed by its row versions
        # and HOT ones (a second statement, not timed).
        counted = not piped[0] and sql.lstrip().startswith('UPDATE "workloads_workload"')
        before = versions() if counted else (0, 0)
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            took = time.perf_counter() - started
            text = " ".join(sql.split())[:100]
            if counted:
                after = versions()
                upd, hot = after[0] - before[0], after[1] - before[1]
                text = f"[{upd} versions, {hot} HOT] {text}"
            timed.append((took, text))

    def backend_cpu(pid: int) -> float:
        # CPU seconds (user + system) the server process ``pid`` has used so far.
        # The command (field 2) is in parentheses and may hold spaces: count after it.
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def copied(cursor, name, columns, rows):  # type: ignore[no-untyped-def]
        started = time.perf_counter()
        count = copy_rows(cursor, name, columns, rows)
        timed.append((time.perf_counter() - started, f"COPY {name} ({count} rows)"))
        return count

    @contextlib.contextmanager
    def window():  # type: ignore[no-untyped-def]
        # Statements sent in a pipeline return at once: the wait is where the block ends.
        started = time.perf_counter()
        with overlapped():
            piped[0] = True
            try:
                yield
            finally:
                piped[0] = False
            ending = time.perf_counter()
        timed.append((time.perf_counter() - ending, "pipeline's wait at its end"))
        timed.append((0.0, f"(pipeline window, wall {time.perf_counter() - started:.4f})"))

    def recorded(record, **kwargs):  # type: ignore[no-untyped-def]
        timed.clear()
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend = int(cursor.fetchone()[0])
        started = time.perf_counter()
        written, hot = 0, 0
        bulk.copy_rows = copied
        actions.overlapped = window
        try:
            with connection.execute_wrapper(statement):
                # An outer transaction (the record's own becomes a savepoint) so that the
                # deferred checks and the commit can be timed apart.
                atomic = transaction.atomic() if commit else contextlib.nullcontext()
                with atomic:
                    written, hot = versions()
                    server = backend_cpu(backend)
                    started = time.perf_counter()
                    cycle = record_cycle(record, **kwargs)
                    after = versions()
                    written, hot = after[0] - written, after[1] - hot
                    if commit:
                        with connection.cursor() as cursor:
                            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
                        timed[-1] = (timed[-1][0], "deferred foreign-key checks")
                    closing = time.perf_counter()
            if commit:
                timed.append((time.perf_counter() - closing, "COMMIT"))
        finally:
            bulk.copy_rows = copy_rows
            actions.overlapped = overlapped
        wall = time.perf_counter() - started
        server = backend_cpu(backend) - server
        print(
            f"  record: wall {wall:.3f}, server CPU {server:.2f}, statements {len(timed)} "
            f"(their wall {sum(t for t, _ in timed):.3f}), workload row versions {written} "
            f"({hot} HOT)",
            flush=True,
        )
        for seconds, text in timed if every else sorted(timed, reverse=True)[:8]:
            print(f"    {seconds:.4f} {text}", flush=True)
        for seconds, text in timed:
            if text.startswith("(pipeline"):
                print(f"    {text}", flush=True)
            elif text.startswith("["):
                print(f"    update {seconds:.4f} {text}", flush=True)
        return cycle

    loop_module.do_record_cycle = recorded  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
