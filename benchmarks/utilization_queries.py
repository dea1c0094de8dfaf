"""B4: the utilisation source's queries at 1,000 nodes x 8 GPUs, against a real Prometheus.

    python benchmarks/utilization_queries.py --nodes 1000 --gpus 8 --collect 120

Starts the DCGM test exporter (hack/dcgm_test_exporter.py, in a process of its own) with
``--nodes`` x ``--gpus`` GPUs -- every metric gpupool reads, the profiling one included, three
GPUs in four held by pods of one to eight GPUs (``populate_pool``) -- and Debian's Prometheus
scraping it every ``--scrape`` seconds; collects for ``--collect`` seconds, then times
``PrometheusSource.read`` over windows of the collected data at several steps, and
``pod_activity`` over each readout. Prints one row per window: the queries sent, the series
and samples returned, Prometheus's own evaluation time of the four queries (its ``stats``),
and the seconds the read and the activity took here (medians of ``--repeat``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpupool.utilization import dcgm
from gpupool.utilization.activity import pod_activity
from gpupool.utilization.prometheus import DEVICE_LABELS, PrometheusSource, range_query
from hack.prometheus_server import PrometheusServer, free_port


def evaluation_s(url: str, start: float, end: float, step: float) -> float:
    """Prometheus's own time (``execTotalTime`` of ``stats=all``) for the four queries."""
    total = 0.0
    for metric in (dcgm.GPU_UTIL, dcgm.GR_ENGINE_ACTIVE, dcgm.FB_USED, dcgm.XID_ERRORS):
        labels = DEVICE_LABELS if metric == dcgm.XID_ERRORS else dcgm.SERIES_LABELS
        form = {"query": range_query(metric, labels), "start": start, "end": end,
                "step": step, "stats": "all"}  # fmt: skip
        request = urllib.request.Request(  # noqa: S310 (our own http server)
            f"{url}/api/v1/query_range", data=urllib.parse.urlencode(form).encode()
        )
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
            total += json.load(response)["data"]["stats"]["timings"]["execTotalTime"]
    return total


def main() -> int:
    """Run the measurement and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--scrape", type=float, default=15.0, help="scrape interval, seconds")
    parser.add_argument("--collect", type=float, default=120.0, help="seconds of data")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    port = free_port()
    exporter = subprocess.Popen(
        [sys.executable, "-m", "hack.dcgm_test_exporter", "--nodes", str(args.nodes),
         "--gpus", str(args.gpus), "--port", str(port)],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent,
    )  # fmt: skip
    assert exporter.stdout is not None
    print(exporter.stdout.readline().strip())
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as response:
        page = response.read()
    lines = page.count(b"\n")
    print(f"a scrape: {lines} lines, {len(page) / 1e6:.1f} MB")
    server = PrometheusServer([f"127.0.0.1:{port}"], scrape_interval_s=args.scrape)
    try:
        server.start(120)
        begin = time.time()
        time.sleep(args.collect)
        end = time.time()
        source = PrometheusSource(server.url, timeout_s=120)
        print(f"collected {end - begin:.0f} s at a scrape every {args.scrape:g} s")
        print("| window | step | queries | series | samples | Prometheus s | read s | activity s |")
        print("|---|---|---|---|---|---|---|---|")
        for window, step in ((60, 15), (60, 5), (args.collect, 15), (args.collect, 5)):
            start = end - window
            reads, activities = [], []
            for _ in range(args.repeat):
                clock = time.perf_counter()
                readout = source.read(start, end, step)
                reads.append(time.perf_counter() - clock)
                clock = time.perf_counter()
                activity = pod_activity(readout)
                activities.append(time.perf_counter() - clock)
            samples = sum(len(s.samples) for s in readout.series)
            evaluated = evaluation_s(server.url, start, end, step)
            print(f"| {window:.0f} s | {step:g} s | {readout.queries} | {len(readout.series)} | "
                  f"{samples} | {evaluated:.2f} | {statistics.median(reads):.2f} | "
                  f"{statistics.median(activities):.2f} |", flush=True)  # fmt: skip
        print(f"pods seen: {len(activity)}")
    finally:
        server.stop()
        exporter.terminate()
        exporter.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
