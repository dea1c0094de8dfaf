"""Numbers carry their units, changes their sign, and times a machine-readable moment the
browser shows in the viewer's zone."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from gpupool.dashboard.templatetags.dashboard import (
    duration,
    gpu_hours,
    gpus,
    local_time,
    percent,
    signed_duration,
    signed_gpus,
)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (8, "8 GPUs"),
        (1, "1 GPU"),
        (Decimal("1.000"), "1 GPU"),
        (0.5, "0.5 GPUs"),
        (Decimal("1234.250"), "1,234.25 GPUs"),
        ("36", "36 GPUs"),
        (0, "0 GPUs"),
        (None, "\u2013"),
        ("none", "none"),
    ],
)
def test_gpus_carry_their_unit(value: object, shown: str) -> None:
    assert gpus(value) == shown  # type: ignore[arg-type]


def test_gpu_hours_and_changes_carry_their_unit_and_sign() -> None:
    assert gpu_hours("12.50") == "12.5 GPU-h"
    assert signed_gpus(4) == "+4 GPUs"
    assert signed_gpus(-2.5) == "\u22122.5 GPUs"
    assert signed_gpus(0) == "no change"
    assert percent(0.42) == "42%"
    assert percent(None) == "\u2013"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (45, "45 s"),
        (0.5, "500 ms"),
        (720, "12 min"),
        (9000, "2 h 30 min"),
        (7200, "2 h"),
        (3 * 86400 + 4 * 3600, "3 d 4 h"),
        (None, "\u2013"),
    ],
)
def test_durations_read_as_a_person_says_them(seconds: float | None, shown: str) -> None:
    assert duration(seconds) == shown


def test_changes_in_time_carry_their_sign() -> None:
    assert signed_duration(-1800) == "\u221230 min"
    assert signed_duration(600) == "+10 min"
    assert signed_duration(0) == "no change"


def test_a_time_is_a_machine_readable_moment_shown_in_the_active_zone() -> None:
    moment = datetime(2026, 3, 1, 14, 30, tzinfo=UTC)
    with timezone.override(ZoneInfo("Asia/Tokyo")):
        html = local_time(moment)
    assert html == (
        '<time datetime="2026-03-01T14:30:00+00:00" data-local="datetime">'
        "2026-03-01 23:30 UTC+9</time>"
    )
    assert 'data-local="date">2026-03-01 UTC<' in local_time(moment, "date")
    assert local_time(None) == "\u2013"


def test_gpus_are_rounded_to_the_milli_gpu_everywhere() -> None:
    assert gpus(16.9414) == "16.941 GPUs"
    assert gpus(Decimal("0.0004")) == "0 GPUs"
