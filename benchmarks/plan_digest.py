"""One sha256 per input of the plan the core makes for it: are two trees' plans byte-identical?

    python benchmarks/plan_digest.py                       # scenarios/, ../shared/scenarios, B1
    python benchmarks/plan_digest.py --seeds 7 --nodes 500 some/folder other/file.json

Each input is planned once and its plan is hashed as the ``plan`` command prints it
(``dump_plan``). Inputs: every scenario file (``*.json`` but ``*.expect.json``) of the
folders and files given -- by default the repository's ``scenarios/`` and, where it exists,
``../shared/scenarios`` -- and B1's synthetic pool at each ``--seeds`` value
(``synthetic_snapshot(nodes, seed)``). Prints one JSON object, input -> digest, plus
``native_core``. Run it in two trees on the same arguments and compare the outputs, e.g.
``PYTHONPATH=/path/to/other/tree python /path/to/other/tree/benchmarks/plan_digest.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from gpupool.scheduler import NATIVE, plan
from gpupool.scheduler.scenario import dump_plan, load_scenario
from gpupool.simulation.scale_pool import synthetic_snapshot

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FOLDERS = (REPO_ROOT / "scenarios", REPO_ROOT.parent / "shared" / "scenarios")


def scenario_files(places: list[Path]) -> list[Path]:
    """The scenario files of the given folders and files, in a fixed order."""
    files: list[Path] = []
    for place in places:
        found = sorted(place.glob("*.json")) if place.is_dir() else [place]
        files.extend(p for p in found if not p.name.endswith(".expect.json"))
    return files


def digest(text: str) -> str:
    """The sha256 of a plan's JSON text."""
    return hashlib.sha256(text.encode()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    """Plan every input and print the digests as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("inputs", nargs="*", type=Path, help="scenario folders or files")
    parser.add_argument("--seeds", type=int, nargs="*", default=[7, 8, 9], help="B1 seeds")
    parser.add_argument("--nodes", type=int, default=5000, help="B1 pool size (5000)")
    options = parser.parse_args(argv)
    places = options.inputs or [folder for folder in DEFAULT_FOLDERS if folder.is_dir()]
    out: dict[str, object] = {"native_core": NATIVE}
    for path in scenario_files(places):
        loaded = load_scenario(path)
        out[str(path)] = digest(dump_plan(plan(loaded.snapshot, loaded.policy, loaded.now)))
    for seed in options.seeds:
        snapshot, policy, now = synthetic_snapshot(options.nodes, seed)
        out[f"b1 nodes={options.nodes} seed={seed}"] = digest(
            dump_plan(plan(snapshot, policy, now))
        )
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
