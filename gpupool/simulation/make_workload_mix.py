"""Derive the demo's workload mix from the public traces into ``workload_mix.json``.

    python -m gpupool.simulation.make_workload_mix [--check]

Reads (from ``$GPUPOOL_DATA_DIR`` or ``../shared/data``, see ``datasets``):

- Philly in Gavel's per-VC form (``philly_gavel_vc/jobs_by_vc_seed0.csv``): the gang sizes
  (``num_gpus``), the run-time distribution per gang size, and each of the six largest
  virtual clusters' inter-arrival gaps (one demo tenant follows one VC);
- openb (``openb/openb_pod_list_default.csv``): the share of one-GPU tasks that ask for a
  fraction of a GPU, and the fractions they ask (``gpu_milli``);
- AcmeTrace's cluster summary (``trace_summaries/acme_cluster_summary.csv``): Philly's median
  GPU-job run time, to which the Gavel run-time estimates are scaled. Gavel's durations are
  model-based estimates (steps / throughput on a V100, median about 3 hours), not Philly's
  recorded run times (median 874 s): the *shape* comes from Gavel, the *scale* from Philly.

Folding: the rare gang sizes 7, 12, 20, 24 and 64 (16 jobs of 15,264) count as the next power
of two up to 32 (7 -> 8, 12 -> 16, 20 and 24 -> 32, 64 -> 32), so every gang fits the demo's
nodes and its NVL72 rack. Distributions are kept as quantiles (every 2.5 %), the file is small
and holds no trace row. ``--check`` compares with the committed file instead of writing it.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from gpupool.simulation.datasets import OPENB, PHILLY, PublishedTrace

MIX_FILE = Path(__file__).with_name("workload_mix.json")
ACME = PublishedTrace(
    folder="trace_summaries",
    title="AcmeTrace's cluster summary (Hu et al., NSDI'24; CC BY 4.0)",
    published="https://github.com/InternLM/AcmeTrace (data/cluster_summary.csv)",
)
QUANTILES = 41  # every 2.5 %
TENANT_STREAMS = 6  # the six largest Philly VCs
RUNTIME_BUCKETS = ((1, 1), (2, 4), (8, 8), (16, 32))  # gang sizes sharing a run-time table
FOLDED = {7: 8, 12: 16, 20: 32, 24: 32, 64: 32}
MIN_RUNTIME_S = 60.0


def quantiles(values: list[float], count: int = QUANTILES) -> list[float]:
    """``count`` evenly spaced quantiles, the minimum and maximum included (linear)."""
    ordered = sorted(values)
    result = []
    for i in range(count):
        position = i * (len(ordered) - 1) / (count - 1)
        low = int(position)
        high = min(low + 1, len(ordered) - 1)
        result.append(ordered[low] + (ordered[high] - ordered[low]) * (position - low))
    return result


def _rounded(values: list[float]) -> list[float]:
    return [round(v, 1) for v in values]


def build_mix() -> dict[str, Any]:
    """The mix, from the traces (raises ``MissingTraceData`` naming a missing file)."""
    with PHILLY.file("jobs_by_vc_seed0.csv").open(newline="") as handle:
        jobs = list(csv.DictReader(handle))
    with OPENB.file("openb_pod_list_default.csv").open(newline="") as handle:
        tasks = list(csv.DictReader(handle))
    with ACME.file("acme_cluster_summary.csv").open(newline="") as handle:
        philly_median = next(
            float(row["med_run_time_gpu"])
            for row in csv.DictReader(handle)
            if row["id"] == "Philly"
        )

    sizes = Counter(FOLDED.get(int(job["num_gpus"]), int(job["num_gpus"])) for job in jobs)
    estimates = [float(job["est_duration_s_v100"]) for job in jobs]
    scale = philly_median / statistics.median(estimates)
    by_bucket: dict[int, list[float]] = defaultdict(list)
    for job in jobs:
        gpus = FOLDED.get(int(job["num_gpus"]), int(job["num_gpus"]))
        low = next(low for low, high in RUNTIME_BUCKETS if low <= gpus <= high)
        by_bucket[low].append(max(float(job["est_duration_s_v100"]) * scale, MIN_RUNTIME_S))

    arrivals: dict[str, list[float]] = defaultdict(list)
    for job in jobs:
        arrivals[job["vc"]].append(float(job["arrival_time_s"]))
    largest = sorted(arrivals, key=lambda vc: (-len(arrivals[vc]), vc))[:TENANT_STREAMS]
    streams = []
    for vc in largest:
        times = sorted(arrivals[vc])
        gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
        streams.append(
            {"philly_vc": vc, "jobs": len(times), "interarrival_s": _rounded(quantiles(gaps))}
        )

    one_gpu = [task for task in tasks if task["num_gpu"] == "1"]
    fractions = Counter(int(t["gpu_milli"]) for t in one_gpu if int(t["gpu_milli"]) < 1000)
    shared = sum(fractions.values())
    return {
        "about": (
            "The demo's workload mix: gang sizes, run times and arrival gaps from Philly "
            "(Gavel's per-VC trace, run times scaled to Philly's recorded median via "
            "AcmeTrace), GPU fractions from openb. Quantile tables, no trace rows. Made by "
            "`python -m gpupool.simulation.make_workload_mix`; read by "
            "gpupool/simulation/workload_generator.py."
        ),
        "sources": {
            "philly": PHILLY.published,
            "openb": OPENB.published,
            "acme": ACME.published,
        },
        "gang_sizes": {
            str(gpus): round(count / len(jobs), 5) for gpus, count in sorted(sizes.items())
        },
        "runtime_scale": {
            "philly_median_run_s": philly_median,
            "gavel_median_estimate_s": round(statistics.median(estimates), 1),
            "factor": round(scale, 6),
        },
        "runtime_s": [
            {"min_gpus": low, "max_gpus": high, "quantiles": _rounded(quantiles(by_bucket[low]))}
            for low, high in RUNTIME_BUCKETS
        ],
        "tenant_streams": streams,
        "shared": {
            "fraction_of_one_gpu_tasks": round(shared / len(one_gpu), 4),
            "gpu_milli": {
                str(milli): round(count / shared, 5) for milli, count in sorted(fractions.items())
            },
        },
    }


def render(mix: dict[str, Any]) -> str:
    """The file's text (sorted keys: the same mix always gives the same bytes)."""
    return json.dumps(mix, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the mix, or with --check compare it with the committed file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    try:
        text = render(build_mix())
    except FileNotFoundError as error:
        print(error, file=sys.stderr)
        return 2
    if args.check:
        same = MIX_FILE.read_text() == text
        print(f"{MIX_FILE.name}: {'matches the traces' if same else 'differs from the traces'}")
        return 0 if same else 1
    MIX_FILE.write_text(text)
    print(f"wrote {MIX_FILE} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
