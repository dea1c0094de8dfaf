"""Fixtures for the simulation tests: the real openb files, and tiny synthetic clusters."""

from __future__ import annotations

import pytest

from gpupool.simulation.placement.openb import OpenbNode, load_nodes, openb_dir


@pytest.fixture(scope="session")
def openb_nodes() -> list[OpenbNode]:
    """The 1,213 GPU nodes of the openb cluster (skips when the shared data is absent)."""
    if not (openb_dir() / "openb_node_list_gpu_node.csv").is_file():
        pytest.skip(f"openb data not found under {openb_dir()}")
    return load_nodes()
