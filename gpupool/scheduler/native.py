"""The decision core compiled to C with mypyc, used when a build of the current sources exists.

The core's sources stay plain, strictly typed Python and are the only truth. ``make native``
(``hack/build_native.py``) compiles them with mypyc -- mypy's compiler, the one black and mypy
itself ship with -- into ``build/native/<key>/``, where the key is a hash of exactly those
sources and the interpreter's ABI. At import, ``gpupool.scheduler`` puts that folder in front
of its own when it exists, so the compiled modules stand in for the Python ones; a source
edited since the build changes the key, and the core runs as plain Python until the next
build: a stale build can never be loaded. ``GPUPOOL_PURE_CORE=1`` forces plain Python.

Compiled methods call each other directly, so replacing a core function or method at runtime
(monkeypatching) does not reach the compiled callers; tests that need that run on the pure
core.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import warnings
from collections.abc import MutableSequence
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# Every module of the core but the package itself and this loader, which must stay Python.
COMPILED_MODULES = (
    "contracts",
    "cycle",
    "cycle_state",
    "estimate",
    "explain",
    "fairshare",
    "fragmentation",
    "lifecycle",
    "mig",
    "placement",
    "preemption",
    "quota",
    "scenario",
    "shares",
    "statement",
    "types",
    "victims",
)
BUILT_MARKER = "BUILT"  # written last by the build: names mypyc's shared library module


def source_key(package_dir: Path = PACKAGE_DIR) -> str:
    """A hash of the compiled modules' sources and the interpreter's ABI."""
    digest = hashlib.sha256(sys.implementation.cache_tag.encode())
    for name in COMPILED_MODULES:
        digest.update(f"\0{name}\0".encode())
        digest.update((package_dir / f"{name}.py").read_bytes())
    return digest.hexdigest()[:24]


def native_root() -> Path:
    """Where builds live: ``$GPUPOOL_NATIVE_DIR``, or ``build/native`` in the checkout."""
    configured = os.environ.get("GPUPOOL_NATIVE_DIR")
    return Path(configured) if configured else PACKAGE_DIR.parents[1] / "build" / "native"


def build_dir() -> Path:
    """The folder a build of the current sources has, or would have."""
    return native_root() / source_key()


def load_native(package_path: MutableSequence[str]) -> bool:
    """Put the compiled core in front of ``package_path`` when it matches the sources."""
    if os.environ.get("GPUPOOL_PURE_CORE", "") not in ("", "0"):
        return False
    directory = build_dir()
    marker = directory / BUILT_MARKER
    if not marker.is_file():
        return False
    library = marker.read_text().strip()
    if library not in sys.modules:
        # mypyc's modules share one C library, imported by a top-level name: load it from
        # the build folder so that folder never needs to be on sys.path.
        paths = [str(p) for p in directory.glob(f"{library}.*.so")]
        spec = importlib.util.spec_from_file_location(library, paths[0]) if paths else None
        if spec is None or spec.loader is None:
            return False
        try:
            module = importlib.util.module_from_spec(spec)
            sys.modules[library] = module
            spec.loader.exec_module(module)
        except (ImportError, OSError) as error:  # a damaged build: run the sources instead
            sys.modules.pop(library, None)
            warnings.warn(f"compiled core in {directory} not loaded: {error}", stacklevel=2)
            return False
    package_path.insert(0, str(directory / "gpupool" / "scheduler"))
    return True


__all__ = ["COMPILED_MODULES", "build_dir", "load_native", "native_root", "source_key"]
