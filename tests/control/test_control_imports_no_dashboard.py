"""The control loop's app does not depend on the dashboard: its modules import nothing of
``gpupool.dashboard``. The admin's list of cycles writes how long each took with the shared
number format (``number_formats.duration``), the very function the pages' ``duration``
filter is. Before, ``control/admin.py`` imported it from the dashboard's template tags."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.contrib.admin import site

from gpupool import number_formats
from gpupool.control.admin import SchedulingCycleAdmin
from gpupool.control.models import SchedulingCycle
from gpupool.dashboard.templatetags.dashboard import register

CONTROL = Path(__file__).resolve().parents[2] / "gpupool" / "control"


def imported_modules(path: Path) -> set[str]:
    """The modules ``path`` imports, by their dotted names."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_no_control_module_imports_the_dashboard() -> None:
    into_dashboard = {
        str(path.relative_to(CONTROL)): sorted(
            name for name in imported_modules(path) if name.startswith("gpupool.dashboard")
        )
        for path in sorted(CONTROL.rglob("*.py"))
    }
    assert {path: names for path, names in into_dashboard.items() if names} == {}
    assert "admin.py" in into_dashboard  # the walk read the admin


def test_the_admin_writes_how_long_a_cycle_took_as_the_pages_do() -> None:
    assert register.filters["duration"] is number_formats.duration
    took = SchedulingCycleAdmin(SchedulingCycle, site).took
    start = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    for seconds, said in ((0.719, "719 ms"), (1.9, "1.9 s"), (180, "3 min")):
        cycle = SchedulingCycle(started_at=start, finished_at=start + timedelta(seconds=seconds))
        assert took(cycle) == said
    assert took(SchedulingCycle(started_at=start)) == number_formats.NO_VALUE  # running
