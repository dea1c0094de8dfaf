"""``manage.py gpupool snapshot``: the live pool as a scenario file that replays the decision."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from control_builders import NOW, POLICY, Pool
from django.core.management import call_command
from django.core.management.base import CommandError

from gpupool.control.snapshot import build_snapshot
from gpupool.quotas.models import PriorityClass
from gpupool.scheduler import plan
from gpupool.scheduler.scenario import dump_plan, load_scenario

pytestmark = pytest.mark.django_db

REPO_ROOT = Path(__file__).resolve().parents[2]
AT = "2026-11-29T10:00:00.123456Z"


def gpupool(*args: str) -> tuple[int, str, str]:
    """Run ``manage.py gpupool ARGS`` in-process; return (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("gpupool", *args, stdout=out, stderr=err)
        status = 0
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    return status, out.getvalue(), err.getvalue()


def test_the_written_file_plans_as_the_pool_does(pool: Pool, tmp_path: Path) -> None:
    target = tmp_path / "pool.json"
    status, out, _ = gpupool("snapshot", "--out", str(target), "--at", AT)
    assert status == 0
    assert out == (
        f"wrote {target}: 6 nodes, 4 queues, 4 workloads holding GPUs, 6 pending, at {AT}\n"
    )
    database = build_snapshot(now=NOW, policy=POLICY)
    expected = dump_plan(plan(database.snapshot, POLICY, database.now))
    status, planned, _ = gpupool("plan", str(target))
    assert (status, planned) == (0, expected + "\n")
    assert load_scenario(target).snapshot == database.snapshot


def test_without_out_the_scenario_goes_to_standard_output(pool: Pool) -> None:
    status, out, _ = gpupool("snapshot", "--at", AT)
    assert status == 0
    scenario = json.loads(out)
    assert scenario["now"] == AT
    assert "default/preemptor" in {w["name"] for w in scenario["workloads"]}


def test_explain_reads_the_written_file(pool: Pool, tmp_path: Path) -> None:
    target = tmp_path / "pool.json"
    gpupool("snapshot", "--out", str(target), "--at", AT)
    status, out, _ = gpupool("plan", str(target), "--explain")
    assert status == 0
    assert "default/rush" in out
    assert "waiting-for-preemption" in out


def test_a_pool_without_a_default_class_exits_2_naming_it(pool: Pool) -> None:
    PriorityClass.objects.filter(default=True).update(default=False)
    status, out, err = gpupool("snapshot", "--at", AT)
    assert (status, out) == (2, "")
    assert err.startswith("cannot snapshot the pool: no default priority class")


def test_a_time_before_a_running_workload_started_exits_2(pool: Pool) -> None:
    status, _, err = gpupool("snapshot", "--at", "2026-11-29T09:00:00Z")
    assert status == 2
    assert "started at 2026-11-29T09:11:00.123456+00:00, after the snapshot's time" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--at", "yesterday"], "argument --at: not an ISO 8601 time: 'yesterday'"),
        (
            ["--at", "2026-11-29T10:00:00"],
            r"argument --at: needs a time zone \(e.g. a trailing Z\)",
        ),
        (["--out", "/no/such/folder/pool.json"], "argument --out: folder /no/such/folder does not"),
    ],
)
def test_bad_options_are_refused_before_anything_is_read(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("gpupool", "snapshot", *args, stdout=io.StringIO())


def test_a_bad_option_exits_2_from_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "gpupool", "snapshot", "--at", "noon"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "argument --at: not an ISO 8601 time: 'noon'" in done.stderr
