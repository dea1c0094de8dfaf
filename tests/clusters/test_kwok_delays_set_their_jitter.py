"""Every pod template the Kubernetes-plane tests give KWOK's pod-complete ``delay`` also sets
its ``jitter-delay``, at least as long: the stage waits no longer than the jitter (5 s unless
set), so an hour's delay alone ends the pod within seconds (docs/kubernetes-testenv.md, "KWOK
stages"). Read from the test sources, without a plane."""

from __future__ import annotations

import ast
import re
from pathlib import Path

DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
JITTER = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"
SECONDS = {"s": 1, "m": 60, "h": 3600}


def seconds(duration: str) -> int:
    """A Go duration of one unit (``3600s``, ``2h``) in seconds."""
    found = re.fullmatch(r"(\d+)([smh])", duration)
    assert found is not None, f"not a duration this test reads: {duration!r}"
    return int(found.group(1)) * SECONDS[found.group(2)]


def annotations_with_a_delay() -> list[tuple[str, dict[str, str]]]:
    """(file:line, the dict's constant entries) of each dict in tests/ that names ``DELAY``."""
    found = []
    for path in sorted(Path(__file__).resolve().parents[1].rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Dict):
                continue
            entries = {
                key.value: value.value
                for key, value in zip(node.keys, node.values, strict=True)
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant)
            }
            if DELAY in entries:
                found.append((f"{path.name}:{node.lineno}", entries))
    return found


def test_each_kwok_delay_comes_with_a_jitter_delay_at_least_as_long() -> None:
    delays = annotations_with_a_delay()
    assert delays, "no pod-complete delay found in the tests"
    for where, entries in delays:
        assert JITTER in entries, f"{where}: {DELAY} without {JITTER}"
        assert seconds(entries[JITTER]) >= seconds(entries[DELAY]), where
