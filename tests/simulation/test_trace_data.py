"""The README's "Trace data" names a sha256 for every file the code reads, and the files found
in the data directory are those files."""

from __future__ import annotations

import hashlib
import re

import pytest

from gpupool.simulation.datasets import OPENB, PHILLY, data_dir, repo_root
from gpupool.simulation.placement.openb import GPU_NODE_LIST, PAPER_TRACES, POD_LIST_PREFIX
from gpupool.simulation.queueing.philly import JOBS_TABLE

LINE = re.compile(r"^([0-9a-f]{64})  (\S+)$")


def readme_checksums() -> dict[str, str]:
    """Path under the data directory -> sha256, from the README's "Trace data" block."""
    text = (repo_root() / "README.md").read_text(encoding="utf-8")
    section = text.split("## Trace data", 1)[1].split("\n## ", 1)[0]
    return {m[2]: m[1] for m in map(LINE.match, section.splitlines()) if m}


def test_the_readme_has_a_checksum_for_every_file_the_benchmarks_read() -> None:
    wanted = {
        f"{OPENB.folder}/{GPU_NODE_LIST}",
        *(f"{OPENB.folder}/{POD_LIST_PREFIX}{trace}.csv" for trace in PAPER_TRACES),
        f"{OPENB.folder}/fgd_expected_results/analysis_allo_discrete.csv",
        f"{OPENB.folder}/fgd_expected_results/analysis_frag_ratio_discrete.csv",
        f"{PHILLY.folder}/{JOBS_TABLE}",
    }
    assert wanted <= set(readme_checksums())


@pytest.mark.parametrize("name", sorted(readme_checksums()))
def test_a_trace_file_found_is_the_one_the_readme_names(name: str) -> None:
    """Checked where the file is found in the data directory."""
    path = data_dir() / name
    if not path.is_file():
        pytest.skip(f"{path} not found")
    assert hashlib.sha256(path.read_bytes()).hexdigest() == readme_checksums()[name]
