"""The queueing modes of ``manage.py gpupool simulate``: ``philly`` (benchmark B3),
``synthetic`` (B3's policies on a drawn trace) and ``whatif`` (recorded demand or a trace
replayed with a proposed change).

Registered in ``gpupool.cli.subcommands.simulate.MODES``; each mode is an argument builder and
a runner ``(options, stdout, stderr) -> exit status``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TextIO

from gpupool.cli.arguments import non_negative_float, output_file, positive_float, positive_int
from gpupool.simulation.queueing.philly import (
    DEFAULT_QUEUE_WEIGHTS,
    QUEUE_WEIGHTS,
    QUEUEING_POLICIES,
    PhillyJob,
)

if TYPE_CHECKING:
    from gpupool.simulation.queueing.synthetic_trace import SyntheticSpec


def add_philly_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``simulate philly``."""
    parser.add_argument(
        "--days", type=positive_float, default=30.0, help="keep jobs of each tenant's first N days"
    )
    _add_queueing_arguments(parser)


# ``simulate synthetic``'s options: one per field of SyntheticSpec, with its help.
SYNTHETIC_OPTIONS: tuple[tuple[str, type, str], ...] = (
    ("tenants", int, "how many tenants"),
    ("days", float, "the window jobs arrive in, in days"),
    ("load", float, "GPU-hours asked inside the window over the pool's GPU-hours in it"),
    ("skew", float, "tenant k asks in proportion to 1/(k+1)^skew; 0: equal tenants"),
    ("bursts", int, "bursts per tenant"),
    ("burst_share", float, "share of each tenant's jobs arriving in its bursts"),
    ("seed", int, "the draw's seed"),
)


def add_synthetic_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``simulate synthetic``: how to draw the trace, then as ``philly``."""
    _add_synthetic_spec_arguments(parser)
    _add_queueing_arguments(parser)


def _add_synthetic_spec_arguments(
    parser: argparse.ArgumentParser, skip: Sequence[str] = (), prefix: str = ""
) -> None:
    """One option per SyntheticSpec field (but those in ``skip``), with its default."""
    from gpupool.simulation.queueing.synthetic_trace import SyntheticSpec

    spec = SyntheticSpec()
    for name, kind, text in SYNTHETIC_OPTIONS:
        if name in skip:
            continue
        default = getattr(spec, name)
        flag = "--" + name.replace("_", "-")
        help_text = f"{prefix}{text} (default {default})"
        parser.add_argument(flag, type=kind, default=default, help=help_text)


def _synthetic_spec(options: dict[str, Any], **given: Any) -> SyntheticSpec:
    """The spec the options ask for (``given`` fields override them); ValueError if bad."""
    from gpupool.simulation.queueing.synthetic_trace import SyntheticSpec

    fields = {name: options[name] for name, _, _ in SYNTHETIC_OPTIONS if name in options}
    return SyntheticSpec(**(fields | given))


def _synthetic_trace(spec: SyntheticSpec) -> list[PhillyJob]:
    """A trace drawn from the Philly jobs of B3 for B3's pool."""
    from gpupool.simulation.queueing.philly import GPUS_PER_NODE, NODES, load_jobs, window
    from gpupool.simulation.queueing.synthetic_trace import synthetic_jobs

    return synthetic_jobs(spec, window(load_jobs()), NODES * GPUS_PER_NODE)


def _add_queueing_arguments(parser: argparse.ArgumentParser) -> None:
    """The policies, their settings and the output: shared by ``philly`` and ``synthetic``."""
    parser.add_argument(
        "--policy",
        action="append",
        choices=list(QUEUEING_POLICIES),
        help="repeatable (default: fifo, kueue-like, gpupool)",
    )
    parser.add_argument(
        "--limit", type=positive_int, help="replay only the first N jobs (by arrival)"
    )
    parser.add_argument(
        "--protected-runtime",
        type=non_negative_float,
        default=1800.0,
        metavar="S",
        help="gpupool: seconds each job is protected after it starts (default 1800)",
    )
    parser.add_argument(
        "--starvation-limit",
        type=positive_float,
        metavar="S",
        help="gpupool: hold capacity for work pending longer than S seconds (default: none)",
    )
    parser.add_argument(
        "--queue-weights",
        choices=list(QUEUE_WEIGHTS),
        default=DEFAULT_QUEUE_WEIGHTS,
        help="each queue's DRF weight: its deserved GPUs (default) or 1 for every queue",
    )
    parser.add_argument(
        "--no-alone",
        action="store_true",
        help="skip the sharing-incentive baseline (each tenant alone on its share)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON only")
    parser.add_argument(
        "--report", type=output_file, help="write a self-contained HTML report here"
    )


def run_philly_mode(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Benchmark B3: queueing and fairness per policy on the Philly VC trace."""
    from gpupool.simulation.queueing.philly import load_jobs

    return _run_queueing(options, load_jobs(), "philly", {}, stdout, stderr)


def run_synthetic_mode(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """The B3 policies on a synthetic trace drawn from the Philly jobs."""
    try:
        spec = _synthetic_spec(options)
        jobs = _synthetic_trace(spec)
        return _run_queueing(options, jobs, "synthetic", spec.to_json(), stdout, stderr)
    except ValueError as error:
        stderr.write(f"simulate synthetic: {error}\n")
        return 2


def _run_queueing(
    options: dict[str, Any],
    jobs: Sequence[PhillyJob],
    trace: str,
    source: dict[str, Any],
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    """Replay ``jobs`` with each chosen policy (and alone); print or write the results."""
    from gpupool.simulation.queueing.philly import gpupool_policy, run_philly

    policies = list(dict.fromkeys(options.get("policy") or QUEUEING_POLICIES))
    kwargs: dict[str, Any] = {
        "days": options["days"],
        "limit": options.get("limit"),
        "jobs": jobs,
        "alone": not options.get("no_alone"),
        "queue_weights": options.get("queue_weights") or DEFAULT_QUEUE_WEIGHTS,
        "settings": {
            "gpupool": gpupool_policy(
                options.get("protected_runtime", 1800.0), options.get("starvation_limit")
            )
        },
        "trace": trace,
        "source": source,
    }
    if options.get("json"):
        run = run_philly(policies, **kwargs)
    else:
        run = _with_progress(lambda hook: run_philly(policies, on_progress=hook, **kwargs), stderr)
    document = run.to_json()
    if options.get("json"):
        stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        _print_philly(document, stdout)
    report = options.get("report")
    if report is not None:
        from gpupool.simulation.report import write_queueing_report

        write_queueing_report(run, report)
        if not options.get("json"):
            stdout.write(f"report written to {report}\n")
    return 0


def _with_progress(work: Callable[[Callable[[str, int, int], None]], Any], stderr: TextIO) -> Any:
    """Run ``work(hook)`` with a rich progress bar on stderr, one task per replay."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=stderr)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} jobs"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        bars: dict[str, Any] = {}

        def hook(label: str, done: int, total: int) -> None:
            if label not in bars:
                bars[label] = progress.add_task(label, total=total)
            if done == total or done % 25 == 0:
                progress.update(bars[label], completed=done)

        return work(hook)


def _print_philly(document: dict[str, Any], stdout: TextIO) -> None:
    """The per-policy table and the per-tenant sharing-incentive table."""
    from rich.console import Console

    from gpupool.simulation.report import queueing_policy_table, queueing_tenant_table, rich_table

    console = Console(file=stdout, width=160)
    console.print(rich_table(queueing_policy_table(document)))
    console.print(rich_table(queueing_tenant_table(document)))


def add_whatif_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``simulate whatif``."""
    parser.add_argument(
        "--set-quota",
        action="append",
        default=[],
        metavar="QUEUE:FLAVOR:deserved=N[,capability=M]",
        help="the proposed change, in GPUs; repeatable",
    )
    parser.add_argument(
        "--set-policy",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=(
            "a proposed scheduling-policy setting, a key of a scenario's policy object "
            "(queueing=fifo, queue_order=head-rank, starvation_limit_s=21600, "
            'victim_search=greedy, phases=\'["enqueue","allocate"]\'); repeatable'
        ),
    )
    parser.add_argument(
        "--days", type=positive_float, default=30.0, help="replay the demand of the last N days"
    )
    parser.add_argument(
        "--trace",
        choices=["philly", "synthetic"],
        help="replay a trace instead of the database's recorded workloads",
    )
    parser.add_argument("--limit", type=positive_int, help="with --trace: only the first N jobs")
    _add_synthetic_spec_arguments(parser, skip=("days",), prefix="with --trace synthetic: ")
    parser.add_argument("--json", action="store_true", help="print JSON only")


def run_whatif_mode(options: dict[str, Any], stdout: TextIO, stderr: TextIO) -> int:
    """Replay demand with today's quotas and policy and with the proposed change; print
    before/after."""
    from gpupool.simulation.queueing.whatif import (
        DEFAULT_POLICY,
        apply_changes,
        apply_policy_changes,
        parse_policy_change,
        parse_quota_change,
        replay_whatif,
    )

    try:
        changes = [parse_quota_change(text) for text in options.get("set_quota") or []]
        policy_changes = dict(parse_policy_change(t) for t in options.get("set_policy") or [])
        proposed_policy = replace(
            DEFAULT_POLICY, policy=apply_policy_changes(DEFAULT_POLICY.policy, policy_changes)
        )
    except ValueError as error:
        stderr.write(f"simulate whatif: {error}\n")
        return 2
    days = options["days"]
    trace, limit = options.get("trace"), options.get("limit")
    if trace == "philly":
        from gpupool.simulation.queueing.philly import load_jobs

        inputs = _trace_inputs(load_jobs(), days, limit, "philly trace")
    elif trace == "synthetic":
        try:
            spec = _synthetic_spec(options, days=days)
        except ValueError as error:
            stderr.write(f"simulate whatif: {error}\n")
            return 2
        drawn = ", ".join(f"{k} {v:g}" for k, v in spec.to_json().items() if k != "days")
        inputs = _trace_inputs(_synthetic_trace(spec), days, limit, f"synthetic trace ({drawn})")
    else:
        inputs = _database_inputs(days)
    jobs, flavors, nodes, queues, classes, window_s, note = inputs
    try:
        proposed = apply_changes(queues, changes, {flavor.name for flavor in flavors})
    except ValueError as error:
        stderr.write(f"simulate whatif: {error}\n")
        return 2
    try:
        result = replay_whatif(
            jobs,
            queues,
            proposed,
            nodes=nodes,
            flavors=flavors,
            priority_classes=classes,
            policy=DEFAULT_POLICY,
            proposed_policy=proposed_policy,
            window_s=window_s,
            changes=changes,
            policy_changes=policy_changes,
        )
    except ValueError as error:
        stderr.write(f"simulate whatif: {error}\n")
        return 2
    document = result.to_json()
    if note:
        document["note"] = note
    if options.get("json"):
        stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        _print_whatif(document, stdout)
    return 0


def _trace_inputs(
    jobs: Sequence[PhillyJob], days: float, limit: int | None, label: str
) -> tuple[Any, ...]:
    """Demand, pool and queues of the B3 setup for a trace's jobs (queues ``vc-<tenant>``,
    flavor ``v100``)."""
    from gpupool.simulation.queueing.philly import (
        DAY_S,
        GPUS_PER_NODE,
        NODES,
        make_cluster,
        sim_jobs,
        tenant_shares,
        window,
    )

    chosen = window(jobs, days, limit)
    cluster = make_cluster(tenant_shares(chosen), NODES * GPUS_PER_NODE)
    return (
        sim_jobs(chosen),
        cluster.flavors,
        cluster.nodes,
        cluster.queues,
        cluster.priority_classes,
        days * DAY_S,
        f"{label}, {len(chosen)} jobs of each tenant's first {days:g} days",
    )


def _database_inputs(days: float) -> tuple[Any, ...]:
    """Demand of the database's recorded workloads over the last ``days`` days."""
    from gpupool.control.clock import pool_now
    from gpupool.simulation.queueing.whatif_db import recorded_demand

    demand = recorded_demand(days, pool_now())
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(demand.skipped.items()))
    note = f"{len(demand.jobs)} recorded workloads of the last {days:g} days"
    if skipped:
        note += f" (left out: {skipped})"
    return (
        demand.jobs,
        demand.flavors,
        demand.nodes,
        demand.queues,
        demand.priority_classes,
        demand.window_s,
        note,
    )


def _print_whatif(document: dict[str, Any], stdout: TextIO) -> None:
    """Pool and per-tenant before/after tables."""
    from rich.console import Console
    from rich.table import Table

    from gpupool.simulation.report import hours

    console = Console(file=stdout, width=160)
    if document.get("note"):
        console.print(document["note"])
    proposal = [
        f"{c['queue']}:{c['flavor']} "
        + ", ".join(f"{k}={v:g}" for k, v in c.items() if k not in ("queue", "flavor"))
        for c in document["changes"]
    ]
    proposal += [f"{k}={json.dumps(v)}" for k, v in document["policy_changes"].items()]
    console.print("proposed: " + ("; ".join(proposal) if proposal else "no change"))
    for label, run in (("before", "today"), ("after", "with the proposal")):
        aside = document.get("set_aside", {}).get(label) or {}
        if aside.get("count"):
            reasons = ", ".join(f"{n} {why}" for why, n in aside["reasons"].items())
            console.print(f"set aside as never fitting {run}: {aside['count']} ({reasons})")
            for job in aside["jobs"]:
                console.print(f"  {job['job']}: {job['detail']}", markup=False)
    pool = Table(title=f"what-if: {document['jobs']} jobs on {document['pool_gpus']} GPUs")
    for column in ("", "wait mean h", "wait p99 h", "JCT mean h", "util", "preemptions"):
        pool.add_column(column, justify="right")
    for label in ("before", "after"):
        entry = document[label]
        pool.add_row(
            label,
            hours(entry["wait_mean_s"]),
            hours(entry["wait_p99_s"]),
            hours(entry["jct_mean_s"]),
            f"{entry['utilisation']:.1%}",
            str(entry["preemptions"]),
        )
    console.print(pool)
    tenants = Table(title="per tenant: before -> after")
    for column in ("tenant", "jobs", "deserved", "wait mean h", "wait p99 h", "GPU-h", "use"):
        tenants.add_column(column, justify="right")
    for tenant, entry in document["tenants"].items():
        before, after = entry["before"] or {}, entry["after"] or {}

        def pair(
            key: str,
            fmt: Callable[[Any], str],
            b: dict[str, Any] = before,
            a: dict[str, Any] = after,
        ) -> str:
            left = "" if b.get(key) is None else fmt(b[key])
            right = "" if a.get(key) is None else fmt(a[key])
            return left if left == right else f"{left} -> {right}"

        tenants.add_row(
            tenant,
            str(before.get("jobs", after.get("jobs", 0))),
            pair("deserved_gpus", lambda v: f"{v:g}"),
            pair("wait_mean_s", hours),
            pair("wait_p99_s", hours),
            pair("gpu_hours", lambda v: f"{v:,.1f}"),
            pair("utilisation_of_deserved", lambda v: f"{v:.0%}"),
        )
    console.print(tenants)
