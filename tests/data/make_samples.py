"""Write the synthetic trace samples the tests replay (``tests/data/``).

    .venv/bin/python tests/data/make_samples.py          # rewrite the samples
    .venv/bin/python tests/data/make_samples.py --check  # exit 1 if a committed file differs

The public traces' licences are unclear, so no row of them is committed: every row here is
drawn from a seeded generator. The files have the real ones' names, columns and formats
(README, "Trace data"), so the loaders, the replays, the commands and the reports run on them
unchanged, with ``GPUPOOL_DATA_DIR`` pointing here. Their figures mean nothing.

- ``openb/``: 24 GPU nodes of the trace's models (and 6 CPU-only nodes in the full node list),
  a ``default`` pod list of the 11 columns whose GPU demand is about 95% of the nodes' GPUs, a
  ``gpuspec33`` variant (a third of the GPU tasks restricted to GPU models) and a
  ``multigpu50`` variant in the 5-column form without ``gpu_spec``; and made-up "paper"
  results for random, bestfit and fgd at seeds 42 and 43 in ``fgd_expected_results/``.
- ``philly_gavel_vc/jobs_by_vc_seed0.csv``: 6 tenants (virtual clusters), 170 gang jobs over
  45 days, each tenant's arrivals counted from its first job; half of them come in bursts of
  large gangs, so that the 1,024-GPU pool of B3 queues, borrows and reclaims.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import random
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261201
MILLI = 1000
DAY_S = 86_400.0

# model, GPUs per node, CPU milli, memory MiB, nodes
NODE_GROUPS = (
    ("G2", 8, 96_000, 760_000, 8),
    ("T4", 2, 64_000, 250_000, 6),
    ("P100", 2, 64_000, 250_000, 4),
    ("V100M32", 8, 96_000, 380_000, 2),
    ("V100M16", 4, 64_000, 250_000, 2),
    ("T4", 4, 96_000, 380_000, 2),
)
CPU_NODES = 6
SHARING_MILLI = (810, 470, 320, 650, 250, 160, 500)
GPU_SPECS = ("G2", "T4", "P100", "V100M16|V100M32", "T4|P100")
TARGET_DEMAND = 0.95  # GPU demand of the default pod list / the nodes' GPUs
POD_COLUMNS = [
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
]
SHORT_POD_COLUMNS = POD_COLUMNS[:5]
PAPER_POLICIES = {"01-Random": 88.0, "05-BestFit": 92.0, "06-FGD": 94.0}  # made-up plateaus

TENANT_JOBS = (60, 50, 40, 30, 15, 5)
JOB_TYPES = (
    ("ResNet-50 (batch size 64)", 9.5),
    ("Transformer (batch size 128)", 5.4),
    ("LM (batch size 20)", 14.0),
    ("Recommendation (batch size 8192)", 110.0),
)  # label, steps per second on one V100 (made up)
P100_SLOWDOWN, K80_SLOWDOWN = 1.77, 5.55
BUSY_DAYS = 2
BURST_SHARE = 0.7  # of a tenant's jobs after its first
SMALL_GANGS = ((1, 60), (2, 15), (4, 15), (8, 10))  # GPUs, weight
BURST_GANGS = ((8, 15), (12, 5), (16, 25), (32, 30), (64, 25))


def _csv(header: list[str], rows: list[list[object]]) -> str:
    """Rows as CSV text with Unix line ends, as the real files are written."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def openb_nodes() -> tuple[list[list[object]], list[list[object]]]:
    """The GPU node list and the full node list (CPU-only nodes first, as in the trace)."""
    gpu_nodes = [
        [model, gpus, cpu, memory]
        for model, gpus, cpu, memory, count in NODE_GROUPS
        for _ in range(count)
    ]
    gpu_rows = [
        [f"openb-node-{i:04d}", c, m, g, model] for i, (model, g, c, m) in enumerate(gpu_nodes)
    ]
    every = [[30_000, 250_000, 0, ""]] * CPU_NODES + [
        [c, m, g, model] for model, g, c, m in gpu_nodes
    ]
    all_rows = [[f"openb-node-{i:04d}", *row] for i, row in enumerate(every)]
    return gpu_rows, all_rows


def openb_tasks(rng: random.Random, capacity_gpus: int) -> list[dict[str, object]]:
    """Tasks of the default pod list until their GPU demand reaches the target."""
    tasks: list[dict[str, object]] = []
    demand = 0
    while demand < TARGET_DEMAND * capacity_gpus * MILLI:
        kind = rng.random()
        if kind < 0.12:
            gpus, milli = 0, 0
        elif kind < 0.50:
            gpus, milli = 1, rng.choice(SHARING_MILLI)
        elif kind < 0.94:
            gpus, milli = 1, MILLI
        else:
            gpus, milli = rng.choice((2, 4, 8)), MILLI
        cpu = rng.choice((2, 4, 6, 8, 12, 16)) * 1000 * max(1, gpus)
        memory = rng.choice((4, 8, 16, 32)) * 1024 * max(1, gpus)
        created = rng.randrange(0, 12_000_000)
        tasks.append(
            {
                "name": f"openb-pod-{len(tasks):04d}",
                "cpu_milli": min(cpu, 64_000),
                "memory_mib": min(memory, 250_000),
                "num_gpu": gpus,
                "gpu_milli": milli,
                "gpu_spec": rng.choice(GPU_SPECS) if gpus and rng.random() < 0.1 else "",
                "qos": rng.choice(("LS", "LS", "BE", "Burstable", "Guaranteed")),
                "pod_phase": rng.choice(("Running", "Succeeded", "Failed", "Pending")),
                "creation_time": created,
                "deletion_time": created + rng.randrange(60, 2_000_000),
                "scheduled_time": created,
            }
        )
        demand += gpus * milli
    return tasks


def openb_files(rng: random.Random) -> dict[str, str]:
    """Every file of the openb sample, by path under tests/data."""
    gpu_rows, all_rows = openb_nodes()
    capacity = sum(int(row[3]) for row in gpu_rows)
    default = openb_tasks(rng, capacity)
    gpuspec = [
        task | {"gpu_spec": rng.choice(GPU_SPECS)}
        if task["num_gpu"] and rng.random() < 1 / 3
        else task
        for task in default
    ]
    multigpu = [
        task | {"num_gpu": rng.choice((2, 4, 8)), "gpu_milli": MILLI}
        if task["num_gpu"] == 1 and rng.random() < 0.15
        else task
        for task in default
    ]
    node_header = ["sn", "cpu_milli", "memory_mib", "gpu", "model"]
    files = {
        "openb/openb_node_list_gpu_node.csv": _csv(node_header, gpu_rows),
        "openb/openb_node_list_all_node.csv": _csv(node_header, all_rows),
    }
    for name, tasks, columns in (
        ("default", default, POD_COLUMNS),
        ("gpuspec33", gpuspec, POD_COLUMNS),
        ("multigpu50", multigpu, SHORT_POD_COLUMNS),
    ):
        rows = [[task[c] for c in columns] for task in tasks]
        files[f"openb/openb_pod_list_{name}.csv"] = _csv(list(columns), rows)
    files |= paper_files(rng)
    return files


def paper_files(rng: random.Random) -> dict[str, str]:
    """Made-up "paper" results in the layouts of fgd_expected_results/: per policy and seed,
    allocation (%) rising with arrived load to a plateau, and a fragmentation rate (%); the
    allocation file has a ``total_gpus`` column, the fragmentation file has none."""
    loads = [str(k) for k in range(131)]
    allocation, fragmentation = [], []
    for policy, plateau in PAPER_POLICIES.items():
        for seed in (42, 43):
            top = plateau + rng.uniform(-0.5, 0.5)
            key = ["openb_pod_list_default", policy, 1.3, seed]
            curve = [round(min(k, top - 5 * math.exp(-k / 40)), 2) for k in range(131)]
            allocation.append([*key, 116, *curve])
            fragmentation.append([*key, *(round(100 - top + k / 10, 2) for k in range(131))])
    key_header = ["workload", "sc_policy", "tune", "seed"]
    folder = "openb/fgd_expected_results"
    return {
        f"{folder}/analysis_allo_discrete.csv": _csv(
            [*key_header, "total_gpus", *loads], allocation
        ),
        f"{folder}/analysis_frag_ratio_discrete.csv": _csv([*key_header, *loads], fragmentation),
    }


def philly_jobs(rng: random.Random) -> list[list[object]]:
    """The flat table's rows: each tenant's jobs, half of them in bursts on busy days that
    the tenants share (large gangs there), the rest small and spread over the 45 days."""
    busy = [rng.uniform(DAY_S, 28 * DAY_S) for _ in range(BUSY_DAYS)]
    rows: list[list[object]] = []
    for tenant, count in enumerate(TENANT_JOBS):
        vc = f"{rng.getrandbits(24):06x}"
        bursts = rng.sample(busy, 2)
        small = tenant >= len(TENANT_JOBS) - 2  # the two smallest tenants run small jobs only
        for index in range(count):
            in_burst = index > 0 and rng.random() < BURST_SHARE
            if index == 0:
                arrival = 0.0  # arrivals count from the tenant's first job
            elif in_burst:
                arrival = rng.choice(bursts) + rng.expovariate(1 / 3600)
            else:
                arrival = rng.uniform(0, 45 * DAY_S)
            table = BURST_GANGS if in_burst and not small else SMALL_GANGS
            sizes, weights = zip(*table, strict=True)
            gpus = rng.choices(sizes, weights=weights)[0]
            label, speed = rng.choice(JOB_TYPES)
            hours = min(rng.lognormvariate(math.log(8), 0.8), 72.0)
            steps = max(1, round(hours * 3600 * speed))
            v100 = steps / speed
            rows.append(
                [
                    vc,
                    index,
                    round(arrival, 1),
                    gpus,
                    label,
                    steps,
                    round(v100, 1),
                    round(v100 * P100_SLOWDOWN, 1),
                    round(v100 * K80_SLOWDOWN, 1),
                ]
            )
    rows.sort(key=lambda row: (float(str(row[2])), str(row[0]), int(str(row[1]))))
    return rows


def philly_files(rng: random.Random) -> dict[str, str]:
    """The Philly sample, by path under tests/data."""
    header = [
        "vc",
        "job_idx",
        "arrival_time_s",
        "num_gpus",
        "job_type",
        "total_steps",
        "est_duration_s_v100",
        "est_duration_s_p100",
        "est_duration_s_k80",
    ]
    return {"philly_gavel_vc/jobs_by_vc_seed0.csv": _csv(header, philly_jobs(rng))}


def samples() -> dict[str, str]:
    """Every sample file's text, by path under tests/data; the same on every call."""
    makers: tuple[Callable[[random.Random], dict[str, str]], ...] = (openb_files, philly_files)
    files: dict[str, str] = {}
    for offset, make in enumerate(makers):
        files |= make(random.Random(SEED + offset))
    return files


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    stale = []
    for name, text in samples().items():
        path = HERE / name
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    if stale:
        print("out of date: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
