"""`manage.py gpupool utilization` names its window's two ends each with its day: a 24h
window read "GPU-hours from 2026-12-07 10:00 to 10:00 UTC", as if it were empty."""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 8, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("arguments", "heading"),
    [
        (("--window", "24h"), "GPU-hours from 2026-12-07 10:00 UTC to 2026-12-08 10:00 UTC"),
        (("--window", "7d"), "GPU-hours from 2026-12-01 10:00 UTC to 2026-12-08 10:00 UTC"),
        (("--window", "6h"), "GPU-hours from 2026-12-08 04:00 UTC to 2026-12-08 10:00 UTC"),
    ],
)
def test_the_heading_gives_each_end_of_the_window_its_day(
    monkeypatch: pytest.MonkeyPatch, arguments: tuple[str, ...], heading: str
) -> None:
    monkeypatch.setattr("gpupool.cli.subcommands.utilization.pool_clock", lambda: NOW)
    out = StringIO()

    call_command("gpupool", "utilization", *arguments, stdout=out)

    assert out.getvalue().splitlines()[0] == heading
