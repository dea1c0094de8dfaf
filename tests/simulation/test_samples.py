"""The synthetic samples are what their committed script writes, and none of their rows is a
row of a published trace."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from simulation_builders import SAMPLE_DIR

from gpupool.simulation.datasets import data_dir


def load_generator() -> ModuleType:
    """``tests/data/make_samples.py`` as a module."""
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLE_DIR / "make_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample_files() -> list[Path]:
    """Every data file of the samples."""
    return sorted(p for p in SAMPLE_DIR.rglob("*.csv"))


def test_the_committed_samples_are_what_the_generator_writes() -> None:
    written = load_generator().samples()
    committed = {
        str(p.relative_to(SAMPLE_DIR)): p.read_text(encoding="utf-8") for p in sample_files()
    }
    assert sorted(written) == sorted(committed)
    for name, text in written.items():
        assert committed[name] == text, f"{name} is out of date: run tests/data/make_samples.py"


def test_the_generator_writes_the_same_files_every_time() -> None:
    generator = load_generator()
    assert generator.samples() == generator.samples()


@pytest.mark.parametrize("sample", sample_files(), ids=lambda p: str(p.relative_to(SAMPLE_DIR)))
def test_no_sample_row_is_a_row_of_the_published_trace(sample: Path) -> None:
    """Checked where the published file is found; the header is the same."""
    published = data_dir() / sample.relative_to(SAMPLE_DIR)
    if not published.is_file():
        pytest.skip(f"{published} not found")
    ours = sample.read_text(encoding="utf-8").splitlines()
    theirs = published.read_text(encoding="utf-8").splitlines()
    assert ours[0] == theirs[0]
    assert not set(ours[1:]) & set(theirs[1:])
