"""A stand-in for NVIDIA's DCGM exporter: serves ``/metrics`` in the exporter's exact text
format (metric names, HELP and TYPE lines, label names and order) for GPUs this machine lacks.

    python -m hack.dcgm_test_exporter --nodes 1000 --gpus 8 --port 9400

The tests and the benchmark run it in-process (``DcgmTestExporter``) and set what each GPU
does -- utilisation, graphics-engine activity, memory, the last XID error, the pod holding
it -- then let a real Prometheus scrape it. It is the only stand-in in those tests: the
hardware. Each scrape renders the GPUs as they are at that moment.
"""

from __future__ import annotations

import argparse
import hashlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DRIVER_VERSION = "550.127.05"

# name, type, help: as dcgm-exporter's default counters describe them.
METRICS = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
)


@dataclass
class FakeGpu:
    """One GPU as the exporter reports it; ``pod`` is (namespace, pod, container) or None."""

    node: str
    index: int
    model: str = "NVIDIA H100 80GB HBM3"
    utilization: float = 0.0
    engine_active: float | None = None  # the profiling metric is reported only when set
    memory_used_mib: float = 0.0
    xid: int = 0
    pod: tuple[str, str, str] | None = None

    @property
    def uuid(self) -> str:
        """A stable GPU UUID in NVIDIA's form, derived from node and index."""
        digest = hashlib.sha256(f"{self.node}/{self.index}".encode()).hexdigest()
        return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"

    def labels(self) -> str:
        """The exporter's labels, in its order."""
        namespace, pod, container = self.pod or ("", "", "")
        return (
            f'gpu="{self.index}",UUID="{self.uuid}",pci_bus_id="00000000:{self.index + 0x18:02X}'
            f':00.0",device="nvidia{self.index}",modelName="{self.model}",'
            f'Hostname="{self.node}",DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}",'
            f'container="{container}",namespace="{namespace}",pod="{pod}"'
        )

    def value(self, metric: str) -> float | None:
        """This GPU's value of ``metric`` (None: not reported)."""
        return {
            "DCGM_FI_DEV_GPU_UTIL": self.utilization,
            "DCGM_FI_DEV_FB_USED": self.memory_used_mib,
            "DCGM_FI_DEV_XID_ERRORS": float(self.xid),
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": self.engine_active,
        }[metric]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class DcgmTestExporter:
    """The exporter's HTTP endpoint on 127.0.0.1 and the GPUs it reports (thread-safe)."""

    def __init__(self, port: int = 0) -> None:
        self._gpus: dict[tuple[str, int], FakeGpu] = {}
        self._lock = threading.Lock()
        self.scrapes = 0
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = exporter.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the scraper gave up (its timeout): nobody is left to answer

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        """host:port to scrape."""
        return f"127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> DcgmTestExporter:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    def add_node(self, node: str, gpus: int, *, model: str = FakeGpu.model) -> None:
        """A node with ``gpus`` idle GPUs that nobody holds."""
        with self._lock:
            for index in range(gpus):
                self._gpus[(node, index)] = FakeGpu(node, index, model)

    def set_gpu(self, node: str, index: int, **changes: object) -> FakeGpu:
        """Change what one GPU reports (fields of ``FakeGpu``); returns it."""
        with self._lock:
            gpu = self._gpus[(node, index)]
            for name, value in changes.items():
                if not hasattr(gpu, name) or name in ("node", "index"):
                    raise AttributeError(f"a GPU has no settable {name!r}")
                setattr(gpu, name, value)
            return gpu

    def gpu(self, node: str, index: int) -> FakeGpu:
        """One GPU as it is now."""
        return self._gpus[(node, index)]

    def render(self) -> str:
        """The metrics page, in the exporter's text format."""
        with self._lock:
            self.scrapes += 1
            gpus = [self._gpus[key] for key in sorted(self._gpus)]
            return "".join(_lines(gpus))


def _lines(gpus: list[FakeGpu]) -> Iterator[str]:
    for name, kind, text in METRICS:
        values = [(gpu, gpu.value(name)) for gpu in gpus]
        values = [(gpu, value) for gpu, value in values if value is not None]
        if not values:
            continue
        yield f"# HELP {name} {text}\n# TYPE {name} {kind}\n"
        for gpu, value in values:
            assert value is not None
            yield f"{name}{{{gpu.labels()}}} {_number(value)}\n"


def populate_pool(exporter: DcgmTestExporter, nodes: int, gpus: int) -> int:
    """Nodes of ``gpus`` GPUs, three quarters of each held by pods of (at most) 8, 4, 2 or
    1 GPUs, node by node. Returns the number of pods."""
    pods = 0
    sizes = (8, 4, 2, 1)
    held = gpus * 3 // 4
    for number in range(nodes):
        node = f"node-{number:04d}"
        exporter.add_node(node, gpus)
        size = max(min(sizes[number % len(sizes)], held), 1)
        for index in range(gpus):
            exporter.set_gpu(
                node, index,
                utilization=float((number * 7 + index * 13) % 100),
                engine_active=((number + index) % 10) / 10,
                memory_used_mib=1024.0 * (index + 1),
            )  # fmt: skip
        for first in range(0, held, size):
            pods += 1
            for index in range(first, min(first + size, held)):
                pod = (f"team-{number % 20}", f"{node}-pod-{first}", "main")
                exporter.set_gpu(node, index, pod=pod)
    return pods


def main() -> None:
    """Serve ``--nodes`` nodes of ``--gpus`` GPUs (``populate_pool``) until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--port", type=int, default=9400)
    args = parser.parse_args()
    exporter = DcgmTestExporter(args.port)
    pods = populate_pool(exporter, args.nodes, args.gpus)
    print(f"serving {args.nodes * args.gpus} GPUs, {pods} pods, on http://{exporter.address}/metrics",
          flush=True)  # fmt: skip
    exporter.start()
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        exporter.stop()


if __name__ == "__main__":
    main()
