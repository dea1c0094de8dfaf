"""Without the public traces, the commands and the benchmark scripts say which file is missing
and where the trace is published, and exit with status 2 -- never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from gpupool.simulation.datasets import OPENB, PHILLY, MissingTraceData, data_dir, repo_root

OPENB_NODES = "openb/openb_node_list_gpu_node.csv"
PHILLY_JOBS = "philly_gavel_vc/jobs_by_vc_seed0.csv"


@pytest.fixture
def empty_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """GPUPOOL_DATA_DIR points at an empty folder."""
    monkeypatch.setenv("GPUPOOL_DATA_DIR", str(tmp_path))
    return tmp_path


def test_the_data_directory_is_the_variable_else_shared_data_beside_the_checkout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUPOOL_DATA_DIR", str(tmp_path))
    assert data_dir() == tmp_path
    assert OPENB.directory() == tmp_path / "openb"
    monkeypatch.delenv("GPUPOOL_DATA_DIR")
    assert data_dir() == repo_root().parent / "shared" / "data"
    assert (repo_root() / "manage.py").is_file()


def test_a_missing_file_names_itself_the_publisher_and_the_variable(empty_data_dir: Path) -> None:
    with pytest.raises(MissingTraceData) as error:
        PHILLY.file("jobs_by_vc_seed0.csv")
    message = str(error.value)
    assert message.startswith(f"{empty_data_dir / PHILLY_JOBS} not found.")
    assert "https://github.com/stanford-futuredata/gavel" in message
    assert "GPUPOOL_DATA_DIR" in message
    assert isinstance(error.value, FileNotFoundError)


@pytest.mark.parametrize(
    ("argv", "missing", "publisher"),
    [
        (["openb"], OPENB_NODES, "https://github.com/alibaba/clusterdata"),
        (["philly"], PHILLY_JOBS, "https://github.com/stanford-futuredata/gavel"),
        (["synthetic"], PHILLY_JOBS, "https://github.com/stanford-futuredata/gavel"),
        (["whatif", "--trace", "philly"], PHILLY_JOBS, "stanford-futuredata/gavel"),
        (["whatif", "--trace", "synthetic"], PHILLY_JOBS, "stanford-futuredata/gavel"),
    ],
)
def test_simulate_without_the_trace_exits_2_naming_the_file_and_its_publisher(
    empty_data_dir: Path, argv: list[str], missing: str, publisher: str
) -> None:
    err = StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("gpupool", "simulate", *argv, "--json", stderr=err)
    assert exit_info.value.code == 2
    assert err.getvalue().startswith(f"simulate {argv[0]}: {empty_data_dir / missing} not found")
    assert publisher in err.getvalue()


@pytest.mark.parametrize(
    ("script", "missing"),
    [("openb_packing_bound.py", OPENB_NODES), ("synthetic_sweep.py", PHILLY_JOBS)],
)
def test_benchmark_scripts_without_the_trace_exit_2_without_a_traceback(
    tmp_path: Path, script: str, missing: str
) -> None:
    result = subprocess.run(
        [sys.executable, str(repo_root() / "benchmarks" / script)],
        capture_output=True,
        text=True,
        env={**os.environ, "GPUPOOL_DATA_DIR": str(tmp_path)},
        check=False,
    )
    assert result.returncode == 2
    assert f"{tmp_path / missing} not found" in result.stderr
    assert "Traceback" not in result.stderr
