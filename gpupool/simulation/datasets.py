"""The public traces the simulations replay, and where they are looked for.

The traces are not in the repository (their licences are unclear): the README's "Trace data"
section says where each is published and gives the sha256 of every file used. They are looked
for in ``$GPUPOOL_DATA_DIR``, else in ``shared/data`` beside the checkout (``../shared/data``
from the repository root), one folder per trace. A run that needs a file that is not there
stops with `MissingTraceData`, whose message names the file and where to get it; the
commands and the benchmark scripts turn it into a message and exit status 2.

The tests do not need the traces: they replay small synthetic samples of the same format
(``tests/data/``, made by ``tests/data/make_samples.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DATA_DIR_VARIABLE = "GPUPOOL_DATA_DIR"


def repo_root() -> Path:
    """The repository root (the folder holding manage.py)."""
    return Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """Where the traces live: ``$GPUPOOL_DATA_DIR``, else ``<repo>/../shared/data``."""
    override = os.environ.get(DATA_DIR_VARIABLE)
    if override:
        return Path(override)
    return repo_root().parent / "shared" / "data"


@dataclass(frozen=True, slots=True)
class PublishedTrace:
    """One public trace: its folder in the data directory, and where it is published."""

    folder: str
    title: str
    published: str

    def directory(self) -> Path:
        """The trace's folder in the data directory (which may not exist)."""
        return data_dir() / self.folder

    def file(self, name: str) -> Path:
        """A file of the trace; `MissingTraceData` when it is not there."""
        path = self.directory() / name
        if not path.is_file():
            raise MissingTraceData(self, path)
        return path


class MissingTraceData(FileNotFoundError):
    """A file of a public trace that a run needs is not in the data directory."""

    def __init__(self, trace: PublishedTrace, path: Path) -> None:
        """Say which file is missing, where the trace is published, and where to put it."""
        self.trace = trace
        self.path = path
        super().__init__(
            f"{path} not found. It belongs to {trace.title}, published at {trace.published}. "
            f"Put the trace's files in {trace.directory()}, or point {DATA_DIR_VARIABLE} at "
            "a folder that holds them (README, 'Trace data')."
        )


OPENB = PublishedTrace(
    folder="openb",
    title="the openb trace (Alibaba's GPU-sharing cluster, FGD paper, USENIX ATC'23)",
    published=(
        "https://github.com/alibaba/clusterdata (cluster-trace-gpu-v2023/csv/); the paper's "
        "own results: https://github.com/hkust-adsl/kubernetes-scheduler-simulator "
        "(experiments/analysis/expected_results/, as fgd_expected_results/)"
    ),
)
PHILLY = PublishedTrace(
    folder="philly_gavel_vc",
    title="the Philly virtual-cluster trace in Gavel's form",
    published=(
        "https://github.com/stanford-futuredata/gavel (scheduler/traces/msr/seed=0/ and "
        "scheduler/simulation_throughputs.json, from which jobs_by_vc_seed0.csv is derived)"
    ),
)
