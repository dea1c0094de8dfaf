"""A real Prometheus scraping the DCGM test exporter, once per test session.

Prometheus is never mocked: the fixture runs Debian's ``prometheus`` binary. Where it is not
installed the tests that need it are skipped, unless ``GPUPOOL_REQUIRE_PROMETHEUS`` is set
(``hack/test.sh`` sets it after installing the package), which makes that a failure.
"""

from __future__ import annotations

import os
import shutil
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
