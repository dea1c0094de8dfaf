"""The compiled core (``make native``) is the core: it loads only for its own sources and
plans exactly like the plain-Python one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

import gpupool.scheduler as core
from gpupool.scheduler import native

REPO_ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = REPO_ROOT / "scenarios"

# Prints a digest of the plans of every scenario and three B1-generator pools.
PLANS = """
import hashlib, sys
from pathlib import Path
import gpupool.scheduler as core
from gpupool.scheduler import plan
from gpupool.scheduler.scenario import dump_plan, load_scenario
from gpupool.simulation.scale_pool import synthetic_snapshot
digest = hashlib.sha256()
for path in sorted(Path(sys.argv[1]).glob("*.json")):
    if not path.name.endswith(".expect.json"):
        loaded = load_scenario(path)
        digest.update(dump_plan(plan(loaded.snapshot, loaded.policy, loaded.now)).encode())
for seed in (1, 2, 3):
    snapshot, policy, now = synthetic_snapshot(400, seed)
    digest.update(dump_plan(plan(snapshot, policy, now)).encode())
print(core.NATIVE, digest.hexdigest())
"""


# Prints whether the core is compiled and where gpupool.scheduler.cycle came from.
WHICH_CORE = (
    "import gpupool.scheduler as c, gpupool.scheduler.cycle as m; print(c.NATIVE, m.__file__)"
)
PLAIN_CYCLE = ["False", str(native.PACKAGE_DIR / "cycle.py")]


def fresh_python(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run a fresh interpreter in the checkout, with ``env`` over this one's (the core
    switch ``GPUPOOL_PURE_CORE`` left out unless given)."""
    full = {k: v for k, v in os.environ.items() if k != "GPUPOOL_PURE_CORE"}
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
        env={**full, **env},
    )


def build_native(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """``hack/build_native.py`` with its build folder and cache under ``tmp_path`` and a C
    compiler that does not exist (so it fails if it tries to compile)."""
    return fresh_python(
        str(REPO_ROOT / "hack" / "build_native.py"),
        *flags,
        CC=str(tmp_path / "no-such-cc"),
        GPUPOOL_NATIVE_DIR=str(tmp_path / "native"),
        GPUPOOL_CACHE=str(tmp_path / "cache"),
    )


def plans_digest(*, pure: bool) -> tuple[str, str]:
    """(NATIVE as printed, digest of the plans) from a fresh interpreter."""
    done = fresh_python("-c", PLANS, str(SCENARIOS), **({"GPUPOOL_PURE_CORE": "1"} if pure else {}))
    assert done.returncode == 0, done.stderr
    out = done.stdout.split()
    return out[0], out[1]


@pytest.mark.skipif(
    not os.environ.get("GPUPOOL_EXPECT_NATIVE"), reason="only where make test built the core"
)
def test_the_compiled_core_is_loaded_where_it_was_built() -> None:
    """``make test`` builds the core, so the suite runs (and B1 is timed) on the compiled one."""
    import gpupool.scheduler.cycle as cycle

    assert core.NATIVE
    assert Path(cycle.__file__).suffix == ".so"
    assert Path(cycle.__file__).is_relative_to(native.build_dir())


@pytest.mark.skipif(not core.NATIVE, reason="the core is not compiled here (make native)")
def test_the_compiled_core_plans_exactly_like_its_sources() -> None:
    """Every scenario and three generated pools give byte-identical plans."""
    compiled = plans_digest(pure=False)
    plain = plans_digest(pure=True)
    assert compiled[0] == "True" and plain[0] == "False"
    assert compiled[1] == plain[1]


def test_every_module_of_the_core_but_the_loader_is_compiled() -> None:
    """A module added to the core is listed for mypyc (shares.py once was not)."""
    modules = {path.stem for path in native.PACKAGE_DIR.glob("*.py")} - {"__init__", "native"}
    assert set(native.COMPILED_MODULES) == modules


def test_the_build_key_follows_every_compiled_source(tmp_path: Path) -> None:
    """Changing any compiled module's source changes the key: a stale build never loads."""
    for name in native.COMPILED_MODULES:
        shutil.copy(native.PACKAGE_DIR / f"{name}.py", tmp_path / f"{name}.py")
    key = native.source_key(tmp_path)
    assert key == native.source_key()
    for name in ("cycle", "types"):
        source = tmp_path / f"{name}.py"
        original = source.read_bytes()
        source.write_bytes(original + b"\n")
        assert native.source_key(tmp_path) != key
        source.write_bytes(original)
    assert native.source_key(tmp_path) == key


def test_without_a_matching_build_the_core_runs_as_python(tmp_path: Path) -> None:
    """An empty build folder, or a build of other sources, leaves the plain-Python core."""
    other = tmp_path / ("0" * 24)  # a build of other sources
    other.mkdir()
    (other / native.BUILT_MARKER).write_text("nothing__mypyc\n")
    done = fresh_python("-c", WHICH_CORE, GPUPOOL_NATIVE_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == PLAIN_CYCLE


@pytest.mark.parametrize(("flags", "exit_code"), [((), 0), (("--require",), 1)])
def test_without_a_c_compiler_the_build_says_so(
    tmp_path: Path, flags: tuple[str, ...], exit_code: int
) -> None:
    """A bare machine: nothing is built, the core stays Python; only --require fails."""
    done = build_native(tmp_path, *flags)
    assert done.returncode == exit_code
    assert "no C compiler" in done.stderr and "plain Python" in done.stderr
    assert not (tmp_path / "native").exists()


def test_a_damaged_build_warns_and_runs_python(tmp_path: Path) -> None:
    """A build folder for these sources whose library cannot load: a warning, plain Python."""
    build = tmp_path / native.source_key()
    build.mkdir()
    (build / native.BUILT_MARKER).write_text("broken__mypyc\n")
    (build / f"broken__mypyc{EXTENSION_SUFFIXES[0]}").write_bytes(b"not a library")
    done = fresh_python("-c", WHICH_CORE, GPUPOOL_NATIVE_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == PLAIN_CYCLE
    assert "compiled core" in done.stderr and "not loaded" in done.stderr


@pytest.mark.skipif(not core.NATIVE, reason="the core is not compiled here (make native)")
def test_a_cached_build_of_the_same_sources_is_reused(tmp_path: Path) -> None:
    """A clean checkout takes the build of its sources from the cache, compiling nothing."""
    shutil.copytree(native.build_dir(), tmp_path / "cache" / "native" / native.source_key())
    done = build_native(tmp_path, "--require")  # no compiler: it must not compile
    assert done.returncode == 0, done.stderr
    assert "copied from the cache" in done.stdout
    assert (tmp_path / "native" / native.source_key() / native.BUILT_MARKER).is_file()
