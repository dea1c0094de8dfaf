"""In Chromium: the Submit form's hint beside the protected runtime follows the queue picked
(the live dry-run's answer brings the picked queue's default and free maximum, out of band),
and the field names the hint in its description."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from test_pages_in_chromium import log_in, open_page, shoot

from gpupool.cli.subcommands.seed_demo import demo_password, seed
from gpupool.quotas.models import Queue


@pytest.fixture
def demo(transactional_db: Any, settings: Any) -> None:
    """The demo pool, no cycle run (the dry-run answers on the database's pool)."""
    settings.REDIS_URL = ""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    seed()
    Queue.objects.filter(name="vision").update(
        default_protected_runtime_s=0, max_protected_runtime_s=600
    )


def says(page: Any, start: str) -> None:
    """Wait until the hint beside the protected runtime starts with ``start``."""
    page.wait_for_function(
        "start => document.getElementById('protected-runtime-limits').textContent"
        ".startsWith(start)",
        arg=start,
    )


def test_the_protected_runtime_hint_follows_the_queue_picked(
    demo: None, live_server: Any, browser: Any, screenshots: Path
) -> None:
    server = live_server.url
    page, problems = open_page(browser)
    log_in(page, server, "admin", demo_password("admin"))
    page.goto(f"{server}/workloads/")
    hint = page.locator("#protected-runtime-limits")
    assert "Queue vision: none (0 s) when left empty" in hint.inner_text()
    field = page.get_by_label("Protected runtime (seconds)")
    assert "protected-runtime-limits" in (field.get_attribute("aria-describedby") or "")
    page.get_by_label("Queue", exact=True).select_option("nlp")
    says(page, "Queue nlp:")
    assert hint.inner_text() == (
        "Queue nlp: 30 min (1800 s) when left empty; at most 2 h (7200 s) at a class with no "
        "budget; longer needs a budgeted priority class."
    )
    page.get_by_label("Queue", exact=True).select_option("vision")
    says(page, "Queue vision:")
    assert re.search(r"at most 10 min \(600 s\)", hint.inner_text())
    page.wait_for_load_state("networkidle")
    hint.scroll_into_view_if_needed()
    shoot(page, screenshots, "admin-submit-protected-limits")
    assert problems == []
