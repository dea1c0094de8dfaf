"""A real Prometheus scraping the DCGM test exporter, once per test session.

Prometheus is never mocked: the fixture runs Debian's ``prometheus`` binary. Where it is not
installed the tests that need it are skipped, unless ``GPUPOOL_REQUIRE_PROMETHEUS`` is set
(``hack/test.sh`` sets it after installing the package), which makes that a failure.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator

import pytest

from hack.dcgm_test_exporter import DcgmTestExporter
from hack.prometheus_server import PrometheusServer


@pytest.fixture(scope="session")
def dcgm_exporter() -> Iterator[DcgmTestExporter]:
    """The stand-in exporter, serving on a free port of 127.0.0.1."""
    exporter = DcgmTestExporter().start()
    yield exporter
    exporter.stop()


@pytest.fixture(scope="session")
def prometheus(dcgm_exporter: DcgmTestExporter) -> Iterator[PrometheusServer]:
    """A Prometheus server scraping ``dcgm_exporter`` every second."""
    if shutil.which("prometheus") is None:
        if os.environ.get("GPUPOOL_REQUIRE_PROMETHEUS"):
            pytest.fail("prometheus is not installed: apt-get install prometheus")
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    server = PrometheusServer([dcgm_exporter.address]).start()
    yield server
    server.stop()


def wait_for_scrapes(exporter: DcgmTestExporter, count: int = 2, timeout_s: float = 15) -> float:
    """Wait until Prometheus scraped ``count`` more times; returns the time after."""
    target = exporter.scrapes + count
    deadline = time.monotonic() + timeout_s
    while exporter.scrapes < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the exporter was scraped {exporter.scrapes} times")
        time.sleep(0.1)
    return time.time()
