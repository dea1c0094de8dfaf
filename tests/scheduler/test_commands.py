"""``manage.py gpupool plan`` and ``gpupool bench cycle`` as an operator runs them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from scheduler_builders import pool, queue, scenario, workload

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def run(*args: str) -> tuple[int, str, str]:
    """Run ``manage.py gpupool ARGS``; return (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("gpupool", *args, stdout=out, stderr=err)
        status = 0
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    return status, out.getvalue(), err.getvalue()


def test_plan_prints_the_plan_as_json() -> None:
    """The output has admit/evict/pending, sorted by workload name."""
    status, out, _ = run("plan", str(SCENARIOS / "preempt-respects-protected-runtime.json"))
    assert status == 0
    result = json.loads(out)
    assert result["evict"] == [{"workload": "old", "reason": "preempt", "for": "urgent"}]
    assert [p["workload"] for p in result["pending"]] == ["urgent"]
    assert result["pending"][0]["reason"] == "waiting-for-preemption"


def test_plan_explain_prints_readable_tables() -> None:
    """--explain shows the pending table with reason, position and the sentence."""
    status, out, _ = run("plan", "--explain", str(SCENARIOS / "topology-domain.json"))
    assert status == 0
    assert "Pending (1)" in out and "tp16" in out and "topology" in out
    assert "Admitted (1)" in out and "tp12" in out


def test_a_malformed_scenario_exits_non_zero_naming_the_field(tmp_path: Path) -> None:
    """No plan is printed; stderr names the offending field."""
    data = scenario(pool(1), [queue("team-a", deserved=8)], [workload("w1", gpus=8, flavor="tpu")])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    status, out, err = run("plan", str(path))
    assert status != 0
    assert out == ""
    assert "workloads[0].pod_sets[0].flavor: unknown flavor 'tpu'" in err


def test_a_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    """Broken JSON is an error, not a crash."""
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    status, out, err = run("plan", str(path))
    assert status != 0 and out == "" and "not JSON" in err


def test_dry_run_answers_layer_by_layer(tmp_path: Path) -> None:
    """--dry-run WORKLOAD.json names the first failing layer."""
    probe = tmp_path / "probe.json"
    probe.write_text(
        json.dumps(
            {
                "name": "probe",
                "queue": "team-a",
                "pod_sets": [{"count": 2, "gpus": 8, "flavor": "h100"}],
                "submitted_at": "2026-11-29T10:00:00Z",
            }
        )
    )
    status, out, _ = run("plan", str(SCENARIOS / "gang-fragmented.json"), "--dry-run", str(probe))
    assert status == 0
    answer = json.loads(out)
    assert [layer["layer"] for layer in answer["layers"]] == ["quota", "capacity", "placement"]
    assert answer["first_failure"] == "placement"


@pytest.mark.slow
def test_bench_cycle_reports_the_b1_figures() -> None:
    """A small pool: the JSON has every field docs/benchmarks.md's B1 reports."""
    status, out, _ = run("bench", "cycle", "--nodes", "200", "--runs", "2", "--json")
    assert status == 0
    figures = json.loads(out)
    for key in ("nodes", "pending", "running", "median_s", "runs_s", "runs_cpu_s", "peak_rss_mib"):
        assert key in figures
    assert figures["nodes"] == 200
    assert figures["running"] == 800 and figures["pending"] == 400
    assert len(figures["runs_s"]) == 2
    # Process CPU per run, and the command's whole CPU, which covers at least the runs.
    assert len(figures["runs_cpu_s"]) == 2 and all(cpu > 0 for cpu in figures["runs_cpu_s"])
    assert figures["cpu_s"] >= sum(figures["runs_cpu_s"])
    # The machine's speed beside the figures: a plain loop's seconds, a fraction of the CPU.
    assert 0 < figures["yardstick_s"] < figures["cpu_s"] * 10
