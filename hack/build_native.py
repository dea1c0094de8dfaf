"""Compile gpupool's decision core with mypyc into ``build/native/<key>/`` (``make native``).

    python hack/build_native.py [--require] [--force]

Does nothing when a build of the current sources exists; copies it from the cache outside
the checkout (``$GPUPOOL_CACHE``, default ``~/.cache/gpupool``, folder ``native/<key>``) when
an earlier checkout built the same sources, so CI's clean clones compile only when the core
changed. Without a C compiler or mypyc it says so and exits 0 -- the core then runs as plain
Python -- unless ``--require`` is given (``make test`` requires it, so CI always tests the
compiled core it benchmarks). Builds of older sources are removed from the checkout; the
cache keeps the newest few. See ``gpupool/scheduler/native.py`` for how a build is loaded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpupool.scheduler import native  # noqa: E402 - needs the checkout on sys.path
from hack.k8s_plane import cache_base  # noqa: E402 - the Kubernetes binaries' cache too

# Run in a scratch copy of the core, so neither the checkout's pyproject (the Django mypy
# plugin) nor its build/ folder takes part.
COMPILE = """
import sys
from mypyc.build import mypycify
from setuptools import setup
modules = sys.argv[1].split(",")
setup(
    name="gpupool-native-core",
    ext_modules=mypycify([f"gpupool/scheduler/{m}.py" for m in modules], opt_level="3"),
    script_args=["build_ext", "--build-lib", sys.argv[2], "--build-temp", "obj"],
)
"""


CACHE_KEEP = 4  # builds kept in the cache, newest first


def cache_root() -> Path:
    """Builds shared by checkouts: $GPUPOOL_CACHE (or ~/.cache/gpupool)/native."""
    return cache_base() / "native"


def install(source: Path, target: Path) -> None:
    """Copy a finished build to ``target``, replacing it whole (no half-copied build)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(target.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)


def compiler_missing() -> str | None:
    """Why mypyc cannot build here, or None."""
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler})"
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return "mypyc is not installed (it comes with the dev tools: make venv)"
    return None


def build(target: Path) -> None:
    """Compile the current sources into ``target`` (replaced whole, marker written last)."""
    key = native.source_key()
    with tempfile.TemporaryDirectory(prefix="gpupool-native-") as scratch:
        source = Path(scratch) / "src"
        (source / "gpupool" / "scheduler").mkdir(parents=True)
        shutil.copy(ROOT / "gpupool" / "__init__.py", source / "gpupool")
        for name in (*native.COMPILED_MODULES, "__init__", "native"):
            shutil.copy(
                native.PACKAGE_DIR / f"{name}.py", source / "gpupool" / "scheduler" / f"{name}.py"
            )
        output = Path(scratch) / "lib"
        log = Path(scratch) / "build.log"
        with log.open("w") as stream:
            done = subprocess.run(
                [sys.executable, "-c", COMPILE, ",".join(native.COMPILED_MODULES), str(output)],
                cwd=source,
                stdout=stream,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if done.returncode != 0:
            sys.stderr.write(log.read_text()[-4000:])
            raise SystemExit(f"mypyc build failed (exit {done.returncode})")
        if native.source_key() != key:
            raise SystemExit("the core's sources changed during the build: run it again")
        libraries = sorted(output.glob("*__mypyc.*.so"))
        if len(libraries) != 1:
            raise SystemExit(f"expected one mypyc shared library, found {libraries}")
        (output / native.BUILT_MARKER).write_text(libraries[0].name.split(".")[0] + "\n")
        install(output, target)


def main() -> int:
    """Build when needed; say what the core will run as."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--require", action="store_true", help="fail if it cannot be built")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args()
    target = native.build_dir()
    if (target / native.BUILT_MARKER).is_file() and not args.force:
        print(f"native core: up to date ({target})")
        return 0
    started = time.monotonic()
    cached = cache_root() / target.name
    if (cached / native.BUILT_MARKER).is_file() and not args.force:
        install(cached, target)
        os.utime(cached)  # recently used: the cache keeps the newest
        how = "copied from the cache"
    else:
        missing = compiler_missing()
        if missing is not None:
            print(
                f"native core: not built, {missing}; the core runs as plain Python", file=sys.stderr
            )
            return 1 if args.require else 0
        print(
            "native core: compiling the decision core with mypyc (a minute or two)...", flush=True
        )
        build(target)
        install(target, cached)
        how = "built"
    for old in target.parent.iterdir():
        if old != target:
            shutil.rmtree(old, ignore_errors=True)
    by_age = sorted(cache_root().iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in by_age[CACHE_KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gpupool.scheduler as s, sys; sys.exit(0 if s.NATIVE else 1)",
        ],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "GPUPOOL_PURE_CORE"},
        check=False,
    )
    if check.returncode != 0:
        raise SystemExit(f"built {target} but gpupool.scheduler does not load it")
    print(f"native core: {how} in {time.monotonic() - started:.0f} s ({target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
