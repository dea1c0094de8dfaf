"""Fixtures for the simulation tests: the synthetic trace samples, and the full traces.

Most tests replay the samples in ``tests/data`` (made by ``tests/data/make_samples.py``), so
they run in any clone. The few that check facts of the published traces themselves (counts
from their READMEs, B3's 30-day window, the paper's means) ask for the full traces and are
skipped where those are not found (README, "Trace data").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from simulation_builders import SAMPLE_DIR

from gpupool.simulation.datasets import OPENB, PHILLY
from gpupool.simulation.placement.openb import GPU_NODE_LIST, OpenbNode, load_nodes
from gpupool.simulation.queueing.philly import JOBS_TABLE, PhillyJob, load_jobs


@pytest.fixture
def sample_data(monkeypatch: pytest.MonkeyPatch) -> Path:
    """GPUPOOL_DATA_DIR points at the synthetic samples for the test."""
    monkeypatch.setenv("GPUPOOL_DATA_DIR", str(SAMPLE_DIR))
    return SAMPLE_DIR


@pytest.fixture
def sample_openb_nodes(sample_data: Path) -> list[OpenbNode]:
    """The 24 GPU nodes of the openb sample."""
    return load_nodes()


@pytest.fixture
def sample_philly_jobs(sample_data: Path) -> list[PhillyJob]:
    """Every job of the Philly sample."""
    return load_jobs()


@pytest.fixture(scope="session")
def full_openb_nodes() -> list[OpenbNode]:
    """The 1,213 GPU nodes of the published openb trace (skips where it is not found)."""
    if not (OPENB.directory() / GPU_NODE_LIST).is_file():
        pytest.skip(f"the full openb trace is not under {OPENB.directory()}")
    return load_nodes()


@pytest.fixture(scope="session")
def full_philly_jobs() -> list[PhillyJob]:
    """Every job of the published Philly table (skips where it is not found)."""
    if not (PHILLY.directory() / JOBS_TABLE).is_file():
        pytest.skip(f"the full Philly trace is not under {PHILLY.directory()}")
    return load_jobs()
