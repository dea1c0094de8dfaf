"""`gpupool loop` refuses a bad --interval by name before any cycle runs (argparse: exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("interval", "message"),
    [
        ("-1", "argument --interval: must be above 0, got -1"),
        ("0", "argument --interval: must be above 0, got 0"),
        ("1e308", "argument --interval: must be at most 86400 (a day), got 1e308"),
        ("nan", "argument --interval: not a finite number: 'nan'"),
    ],
)
def test_a_bad_interval_is_refused_by_name(interval: str, message: str) -> None:
    out = StringIO()
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call_command("gpupool", "loop", "--interval", interval, "--cycles", "2", stdout=out)
    assert out.getvalue() == ""  # no cycle ran


def test_a_negative_interval_exits_2_on_the_command_line(tmp_path: Path) -> None:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    env.pop("REDIS_URL", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "gpupool", "loop", "--interval", "-1",
         "--cycles", "2"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "argument --interval: must be above 0, got -1" in done.stderr
    assert "cycle" not in done.stdout
