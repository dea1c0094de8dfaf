"""Fixtures for the simulation tests: the real openb files, and tiny synthetic clusters."""

from __future__ import annotations

import pytest

from gpupool.simulation.datasets import OPENB
from gpupool.simulation.placement.openb import GPU_NODE_LIST, OpenbNode, load_nodes


@pytest.fixture(scope="session")
def openb_nodes() -> list[OpenbNode]:
    """The 1,213 GPU nodes of the openb cluster (skips when the shared data is absent)."""
    if not (OPENB.directory() / GPU_NODE_LIST).is_file():
        pytest.skip(f"openb data not found under {OPENB.directory()}")
    return load_nodes()
