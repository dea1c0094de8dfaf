"""A real Prometheus server for tests and benchmarks: Debian's ``prometheus`` binary, started
with a temporary configuration that scrapes given targets every second, on a free port of
127.0.0.1, with its data in a temporary folder. ``hack/test.sh`` installs the package.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

BINARY = "prometheus"


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrometheusServer:
    """One Prometheus process scraping ``targets`` (host:port, ``/metrics``) every second."""

    def __init__(self, targets: list[str], *, scrape_interval_s: float = 1.0) -> None:
        self.binary = shutil.which(BINARY) or ""
        if not self.binary:
            raise FileNotFoundError("prometheus is not installed (apt-get install prometheus)")
        self.folder = Path(tempfile.mkdtemp(prefix="gpupool-prometheus-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        interval = f"{scrape_interval_s:g}s"
        config = {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [
                {
                    "job_name": "dcgm",
                    "honor_labels": True,  # keep the exporter's pod labels as they are
                    "scrape_timeout": interval,
                    "static_configs": [{"targets": targets}],
                }
            ],
        }
        (self.folder / "prometheus.yml").write_text(json.dumps(config))  # JSON is YAML
        self.log = self.folder / "prometheus.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 30.0) -> PrometheusServer:
        """Start the process and wait until it answers and has scraped every target once."""
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    f"--config.file={self.folder / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.folder / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log.read_text()[-2000:]}")
            if self._targets_up():
                return self
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"prometheus did not scrape its targets in {timeout_s:g}s")

    def _targets_up(self) -> bool:
        try:
            url = f"{self.url}/api/v1/targets"
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (ours: http)
                targets = json.load(response)["data"]["activeTargets"]
        except OSError:
            return False
        return bool(targets) and all(t.get("health") == "up" for t in targets)

    def stop(self) -> None:
        """Stop the process and remove its data."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
