"""Helpers of the utilisation tests that talk to the real Prometheus."""

from __future__ import annotations

import time

from hack.dcgm_test_exporter import DcgmTestExporter


def wait_for_scrapes(exporter: DcgmTestExporter, count: int = 2, timeout_s: float = 15) -> float:
    """Wait until Prometheus scraped ``count`` more times; returns the time after."""
    target = exporter.scrapes + count
    deadline = time.monotonic() + timeout_s
    while exporter.scrapes < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the exporter was scraped {exporter.scrapes} times")
        time.sleep(0.1)
    return time.time()
