"""Browser tests: the real pages in Debian's headless Chromium, driven by Playwright's Python
package against a live server. No browser is ever downloaded: Chromium is ``/usr/bin/chromium``
(``hack/test.sh`` installs Debian's package); without it these tests are skipped, saying why,
except under ``make test`` (``GPUPOOL_REQUIRE_BROWSER=1``), where they fail.

Each test gets a fresh browser profile (a new user-data folder) at 1366x768, the laptop screen
the pages are made for, and the demo pool (``seed-demo``) with some activity on it
(``browser_world``). Screenshots go to ``build/screenshots/`` (git-ignored).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Playwright's sync API runs an event loop in this thread; the tests' own database calls
# between browser steps are ordinary synchronous ones.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1366, "height": 768}
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is a browser test."""
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def playwright_driver() -> Iterator[Any]:
    """Playwright's driver for the session (skipped without Debian's Chromium, unless
    ``GPUPOOL_REQUIRE_BROWSER=1``, as ``make test`` sets: then that fails)."""
    if not Path(CHROMIUM).is_file():
        missing = f"{CHROMIUM} is missing: install Debian's chromium (hack/test.sh does)"
        if os.environ.get("GPUPOOL_REQUIRE_BROWSER") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as driver:
        yield driver


@pytest.fixture
def browser(playwright_driver: Any, tmp_path: Path) -> Iterator[Any]:
    """A fresh Chromium profile at 1366x768 (its own user-data folder)."""
    context = playwright_driver.chromium.launch_persistent_context(
        str(tmp_path / "profile"),
        executable_path=CHROMIUM,
        headless=True,
        args=CHROMIUM_ARGS,
        viewport=VIEWPORT,
        timezone_id="Europe/Paris",
        locale="en-GB",
    )
    context.set_default_timeout(15_000)
    yield context
    context.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """``build/screenshots/``, emptied once per session."""
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    return SCREENSHOTS


@pytest.fixture
def world(transactional_db: Any, settings: Any) -> Any:
    """The demo pool with running, waiting and preempted work, a few cycles, and what-ifs
    run in a thread of the server (no broker)."""
    from browser_world import demo_world

    settings.REDIS_URL = ""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return demo_world()
