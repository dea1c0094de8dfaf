"""Bad input never crashes, in ``plan`` and ``--dry-run`` alike (issue 13, item 11).

Every malformed file is a ``ScenarioError`` (exit status 2 from the command) whose message
starts with the path of the offending field, or ``(file)``/``(top)`` when the file as a whole
is wrong: huge integers, NaN and infinities, deep nesting, bytes that are not UTF-8, wrong
types, and sizes beyond the bounds of docs/scheduler.md "Limits and errors". Huge inputs
are refused within seconds and bounded memory, before anything of their size is built.
"""

from __future__ import annotations

import copy
import io
import json
import math
import re
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scheduler_builders import check_invariants, node, pool, queue, scenario, workload

from gpupool.scheduler import plan
from gpupool.scheduler.estimate import dry_run
from gpupool.scheduler.scenario import (
    MAX_FILE_BYTES,
    MAX_GPUS_PER_NODE,
    MAX_NAME_LENGTH,
    MAX_NODES,
    MAX_POD_SETS,
    MAX_PODS_PER_WORKLOAD,
    MAX_PRIORITY_VALUE,
    MAX_QUEUE_DEPTH,
    MAX_TOTAL_PODS,
    ScenarioError,
    hypothetical_workload_from_dict,
    load_scenario,
    scenario_from_dict,
)

MIB = 1024 * 1024


def base() -> dict[str, Any]:
    """A valid scenario with a value in every kind of numeric field the reader takes."""
    data = scenario(
        pool(2),
        [
            queue(
                "team-a",
                deserved=8,
                capability=16,
                guarantee=2,
                weight=2,
                lending_limit=4,
                max_protected_runtime_s=7200,
                default_protected_runtime_s=600,
            )
        ],
        [
            workload("w0", gpus=4, on=[("n1", [0, 1, 2, 3])], cpu=8, memory_gb=64),
            workload(
                "w1",
                gpus=8,
                min_member=1,
                protected_s=3600,
                expected_runtime_s=7200,
                missing_pods=0,
            ),
        ],
        budgets=[{"tenant": "team-a", "priority_class": "high", "gpu_hours": 100, "used": 1}],
        policy={
            "placement": "gpupool",
            "starvation_limit_s": 1800,
            "preemption_backoff": {"max_preemptions": 3, "window_s": 3600, "cooldown_s": 1800},
            "victim_protection": {"evictions": 2, "window_s": 21600, "protected_s": 1800},
            "preemption_attempts_per_queue": 2,
        },
    )
    data["nodes"][0]["unhealthy_gpus"] = [7]
    data["workloads"][1]["pod_sets"][0]["gpu_memory_gb"] = 40
    return copy.deepcopy(data)  # the builders share their priority classes between scenarios


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, list[Any], Any]]:
    """Every leaf of a decoded scenario: its path as the reader writes it, the keys that
    reach it, and its value."""

    def walk(item: Any, text: str, keys: list[Any]) -> Iterator[tuple[str, list[Any], Any]]:
        if isinstance(item, dict):
            for key, child in item.items():
                yield from walk(child, f"{text}.{key}" if text else key, [*keys, key])
        elif isinstance(item, list):
            for index, child in enumerate(item):
                yield from walk(child, f"{text}[{index}]", [*keys, index])
        else:
            yield text, keys, item

    yield from walk(value, path, [])


def numeric_leaves() -> list[tuple[str, list[Any]]]:
    """The paths of the base scenario's numbers (booleans aside)."""
    return [
        (path, keys)
        for path, keys, value in leaves(base())
        if isinstance(value, int | float) and not isinstance(value, bool)
    ]


def with_literal(keys: list[Any], literal: str) -> str:
    """The base scenario as JSON text with the leaf at ``keys`` written as ``literal``."""
    data = base()
    target = data
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = "__LITERAL__"
    return json.dumps(data).replace('"__LITERAL__"', literal)


def refused(path: Path) -> str:
    """The message a file is refused with (it must be refused)."""
    with pytest.raises(ScenarioError) as error:
        load_scenario(path)
    return str(error.value)


# -- one table per class of bad number: every numeric field, each bad literal ---------------

BAD_LITERALS = {
    "a huge integer": "9" * 5000,
    "a huge negative integer": "-" + "9" * 5000,
    "a 25-digit integer": "1" + "0" * 24,
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "a float beyond range": "1e400",
}
NUMBER_CASES = [
    (f"{name} in {path}", keys, literal, path)
    for name, literal in BAD_LITERALS.items()
    for path, keys in numeric_leaves()
]


@pytest.mark.parametrize(
    ("keys", "literal", "path"),
    [case[1:] for case in NUMBER_CASES],
    ids=[case[0] for case in NUMBER_CASES],
)
def test_a_bad_number_in_any_numeric_field_is_refused_naming_the_field(
    tmp_path: Path, keys: list[Any], literal: str, path: str
) -> None:
    """Huge integers (even past Python's 4,300-digit conversion limit), NaN and the
    infinities Python's json accepts are refused, each naming its own field."""
    file = tmp_path / "bad.json"
    file.write_text(with_literal(keys, literal))
    message = refused(file)
    assert message.startswith(f"{path}: "), message


@pytest.mark.parametrize(("path", "keys"), numeric_leaves(), ids=[p for p, _ in numeric_leaves()])
@pytest.mark.parametrize("value", [10**400, -(10**400), math.nan, -math.inf])
def test_a_bad_number_in_a_decoded_scenario_is_refused_naming_the_field(
    path: str, keys: list[Any], value: float
) -> None:
    """The same from a dict (what-if and tests build them): an int too large for a float
    is range-checked as an int, compiled core or not."""
    data = base()
    target: Any = data
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    with pytest.raises(ScenarioError, match=rf"^{re.escape(path)}: "):
        scenario_from_dict(data)


def test_every_kind_of_numeric_field_is_in_the_table() -> None:
    """The table covers nodes, flavors, queues, quota, classes, budgets, pod sets,
    workloads, placements and the policy."""
    paths = {path for path, _ in numeric_leaves()}
    for expected in (
        "nodes[0].gpus",
        "nodes[0].unhealthy_gpus[0]",
        "flavors[0].hourly_price",
        "queues[1].quota.h100.capability",
        "queues[1].lending_limit",
        "priority_classes[0].value",
        "budgets[0].used",
        "workloads[1].pod_sets[0].count",
        "workloads[1].pod_sets[0].gpu_memory_gb",
        "workloads[0].placement[0].gpus[0]",
        "workloads[1].expected_runtime_s",
        "policy.victim_protection.protected_s",
        "policy.preemption_attempts_per_queue",
    ):
        assert expected in paths


# -- whole-file problems and absurd sizes -----------------------------------------------------


@dataclass
class BadFile:
    """A malformed file and the start of the message it must be refused with."""

    name: str
    content: Callable[[], bytes]
    message: str


def scenario_bytes(mutate: Callable[[dict[str, Any]], object]) -> Callable[[], bytes]:
    """The base scenario, changed by ``mutate``, as a file's bytes."""

    def build() -> bytes:
        data = copy.deepcopy(base())
        mutate(data)
        return json.dumps(data).encode()

    return build


def workload_one(**changes: Any) -> Callable[[dict[str, Any]], object]:
    """Change fields of the pending workload (``workloads[1]``)."""
    return lambda data: data["workloads"][1].update(changes)


def pod_set_one(**changes: Any) -> Callable[[dict[str, Any]], object]:
    """Change fields of the pending workload's pod set."""
    return lambda data: data["workloads"][1]["pod_sets"][0].update(changes)


def chain_of_queues(length: int) -> Callable[[dict[str, Any]], object]:
    """Hang a chain of ``length`` queues under the root."""

    def mutate(data: dict[str, Any]) -> None:
        parent = "root"
        for index in range(length):
            data["queues"].append({"name": f"q{index}", "parent": parent})
            parent = f"q{index}"

    return mutate


def _unknown_huge_key(data: dict[str, Any]) -> None:
    data["k" * 1_000_000] = 1


def many_workloads_of(count: int, pods: int) -> Callable[[dict[str, Any]], object]:
    """``count`` pending workloads of ``pods`` pods each."""

    def mutate(data: dict[str, Any]) -> None:
        data["workloads"] = [
            workload(f"w{index}", gpus=1, count=pods, min_member=1) for index in range(count)
        ]

    return mutate


BAD_FILES = [
    BadFile("an empty file", lambda: b"", "(file): not JSON"),
    BadFile("a truncated file", lambda: json.dumps(base()).encode()[:-10], "(file): not JSON"),
    BadFile("bytes that are not UTF-8", lambda: b'{"now": "\xff\xfe"}', "(file): not UTF-8"),
    BadFile("UTF-16 text", lambda: json.dumps(base()).encode("utf-16"), "(file): not UTF-8"),
    BadFile("a UTF-8 byte order mark", lambda: b"\xef\xbb\xbf{}", "(file): not JSON"),
    BadFile(
        "nesting deeper than the parser goes",
        lambda: b'{"now": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "(file): JSON nested too deeply",
    ),
    BadFile(
        "nesting where an object belongs",
        scenario_bytes(lambda d: d.update(flavors=[json.loads("[" * 200 + "]" * 200)])),
        "flavors[0]: must be an object",
    ),
    BadFile("a list at the top", lambda: b"[]", "(top): must be an object"),
    BadFile("a string at the top", lambda: b'"scenario"', "(top): must be an object"),
    BadFile("a number at the top", lambda: b"3", "(top): must be an object"),
    BadFile("null at the top", lambda: b"null", "(top): must be an object"),
    BadFile("true at the top", lambda: b"true", "(top): must be an object"),
    BadFile(
        "nodes as an object",
        scenario_bytes(lambda d: d.update(nodes={})),
        "nodes: must be a list",
    ),
    BadFile(
        "a pod set as a list",
        scenario_bytes(lambda d: d["workloads"][1].update(pod_sets=[[1, 8]])),
        "workloads[1].pod_sets[0]: must be an object",
    ),
    BadFile(
        "a name that is a number",
        scenario_bytes(lambda d: d["nodes"][0].update(name=7)),
        "nodes[0].name: must be a non-empty string",
    ),
    BadFile(
        "a lone surrogate in a name",
        lambda: json.dumps(base()).replace('"w1"', '"w\\ud800"').encode(),
        "workloads[1].name: not valid Unicode text",
    ),
    BadFile(
        "a name longer than the bound",
        scenario_bytes(workload_one(name="w" * (MAX_NAME_LENGTH + 1))),
        f"workloads[1].name: longer than {MAX_NAME_LENGTH} characters",
    ),
    BadFile(
        "an unknown key of a million characters",
        scenario_bytes(_unknown_huge_key),
        "'" + "k" * 64 + "'...: unknown key",
    ),
    BadFile(
        "a node with more GPUs than the bound",
        scenario_bytes(lambda d: d["nodes"][1].update(gpus=MAX_GPUS_PER_NODE + 1)),
        f"nodes[1].gpus: must be <= {MAX_GPUS_PER_NODE}",
    ),
    BadFile(
        "more nodes than the bound",
        scenario_bytes(lambda d: d.update(nodes=[node(f"n{i}") for i in range(MAX_NODES + 1)])),
        f"nodes: {MAX_NODES + 1} entries, at most {MAX_NODES}",
    ),
    BadFile(
        "a priority above Kubernetes' bound",
        scenario_bytes(lambda d: d["priority_classes"][3].update(value=MAX_PRIORITY_VALUE + 1)),
        f"priority_classes[3].value: must be <= {MAX_PRIORITY_VALUE}",
    ),
    BadFile(
        "a priority below Kubernetes' bound",
        scenario_bytes(lambda d: d["priority_classes"][0].update(value=-MAX_PRIORITY_VALUE - 1)),
        f"priority_classes[0].value: must be >= -{MAX_PRIORITY_VALUE}",
    ),
    BadFile(
        "a pod set of more pods than a workload may have",
        scenario_bytes(pod_set_one(count=MAX_PODS_PER_WORKLOAD + 1)),
        f"workloads[1].pod_sets[0].count: must be <= {MAX_PODS_PER_WORKLOAD}",
    ),
    BadFile(
        "pod sets adding up to more pods than a workload may have",
        scenario_bytes(
            workload_one(
                pod_sets=[{"count": MAX_PODS_PER_WORKLOAD, "gpus": 1, "flavor": "h100"}] * 2
            )
        ),
        f"workloads[1].pod_sets: {2 * MAX_PODS_PER_WORKLOAD} pods, at most",
    ),
    BadFile(
        "more pod sets than the bound",
        scenario_bytes(
            workload_one(pod_sets=[{"count": 1, "gpus": 1, "flavor": "h100"}] * (MAX_POD_SETS + 1))
        ),
        f"workloads[1].pod_sets: {MAX_POD_SETS + 1} entries, at most {MAX_POD_SETS}",
    ),
    BadFile(
        "more pods in all than the bound",
        scenario_bytes(many_workloads_of(11, MAX_PODS_PER_WORKLOAD)),
        f"workloads[10].pod_sets: the workloads up to this one ask {11 * MAX_PODS_PER_WORKLOAD}",
    ),
    BadFile(
        "a pod asking more GPUs than a node may have",
        scenario_bytes(pod_set_one(gpus=MAX_GPUS_PER_NODE + 1)),
        f"workloads[1].pod_sets[0].gpus: must be <= {MAX_GPUS_PER_NODE}",
    ),
    BadFile(
        "a flavor listed twice in a pod set",
        scenario_bytes(pod_set_one(flavor=["h100", "h100"])),
        "workloads[1].pod_sets[0].flavor[1]: flavor 'h100' listed twice",
    ),
    BadFile(
        "a protected window of more than ten years",
        scenario_bytes(workload_one(protected_runtime_s=10 * 365 * 86_400 + 1)),
        "workloads[1].protected_runtime_s: must be <= 315360000",
    ),
    BadFile(
        "a time in the 24th century",
        scenario_bytes(lambda d: d.update(now="2300-01-01T00:00:00Z")),
        "now: must be between 1970-01-01T00:00:00Z and 2200-01-01T00:00:00Z",
    ),
    BadFile(
        "a time at the end of the calendar",
        scenario_bytes(lambda d: d.update(now="9999-12-31T23:59:59-23:59")),
        "now: must be between",
    ),
    BadFile(
        "a zero weight",
        scenario_bytes(lambda d: d["queues"][1].update(weight=0)),
        "queues[1].weight: must be >= 0.001",
    ),
    BadFile(
        "a queue tree deeper than the bound",
        scenario_bytes(chain_of_queues(MAX_QUEUE_DEPTH)),
        f"queues[{MAX_QUEUE_DEPTH + 1}].parent: {MAX_QUEUE_DEPTH + 1} queues from the root",
    ),
    BadFile(
        "a phase listed twice",
        scenario_bytes(lambda d: d["policy"].update(phases=["allocate", "allocate"])),
        "policy.phases[1]: 'allocate' listed twice",
    ),
    BadFile(
        "more phases than there are",
        scenario_bytes(lambda d: d["policy"].update(phases=["allocate"] * 1000)),
        "policy.phases: 1000 entries, at most 7",
    ),
    BadFile(
        "more unhealthy GPUs than the node has",
        scenario_bytes(lambda d: d["nodes"][0].update(unhealthy_gpus=list(range(9)))),
        "nodes[0].unhealthy_gpus: 9 entries, at most 8",
    ),
]


@pytest.mark.parametrize("case", BAD_FILES, ids=[case.name for case in BAD_FILES])
def test_a_malformed_file_is_refused_naming_the_field(tmp_path: Path, case: BadFile) -> None:
    """The message starts with the field's path (or says what is wrong with the file) and
    stays short, whatever the file holds."""
    file = tmp_path / "bad.json"
    file.write_bytes(case.content())
    message = refused(file)
    assert message.startswith(case.message), message
    assert len(message) < 300


def test_a_queue_tree_exactly_as_deep_as_the_bound_is_read() -> None:
    """The depth bound counts the root and the leaf: 16 queues from root to leaf pass."""
    data = base()
    chain_of_queues(MAX_QUEUE_DEPTH - 2)(data)  # root, team-a's sibling chain of 14
    data["queues"].append({"name": "leaf", "parent": f"q{MAX_QUEUE_DEPTH - 3}"})
    assert len(scenario_from_dict(data).snapshot.queues) == MAX_QUEUE_DEPTH + 1


def test_a_long_chain_of_queues_is_refused_quickly() -> None:
    """Depths are remembered, so 10,000 queues in one chain cost one walk, not 50 million."""
    data = base()
    chain_of_queues(9_998)(data)
    started = time.perf_counter()
    with pytest.raises(ScenarioError, match=r"queues from the root, at most 16"):
        scenario_from_dict(data)
    assert time.perf_counter() - started < 5


# -- random input: it parses, or it is a ScenarioError; never another exception ----------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([0, -1, 2**31, 2**63, 10**30, -(10**30), 10**400])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["h100", "team-a", "w0", "n1", "root", "2026-11-29T09:00:00Z", "\ud800"])
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
BASE_PATHS = [keys for _, keys, _ in leaves(base())]


def _containers(data: Any, keys: list[Any]) -> list[list[Any]]:
    """The paths of the containers above a leaf (to replace whole objects and lists)."""
    return [keys[:end] for end in range(1, len(keys))]


ALL_PATHS = sorted(
    {tuple(path) for keys in BASE_PATHS for path in [keys, *_containers(base(), keys)]},
    key=lambda path: [str(key) for key in path],
)


def mutated(keys: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """The base scenario with the value at ``keys`` replaced."""
    data = base()
    target: Any = data
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return data


def plans_or_is_refused(data: Any) -> None:
    """Read it; if it is read, plan it and check the plan's invariants."""
    try:
        loaded = scenario_from_dict(data)
    except ScenarioError:
        return
    check_invariants(loaded, plan(loaded.snapshot, loaded.policy, loaded.now))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ALL_PATHS), JSON_VALUES)
def test_any_value_in_any_field_is_read_or_refused_never_a_crash(
    keys: tuple[Any, ...], value: Any
) -> None:
    """Random JSON-ish values in place of any field or object of a valid scenario."""
    plans_or_is_refused(mutated(keys, value))


@settings(max_examples=100, deadline=None)
@given(JSON_VALUES, st.dictionaries(st.text(max_size=12), JSON_VALUES, max_size=4))
def test_any_value_as_a_whole_scenario_is_refused_never_a_crash(
    value: Any, extra: dict[str, Any]
) -> None:
    """Random values as the top, and random keys added to a valid scenario."""
    plans_or_is_refused(value)
    plans_or_is_refused({**base(), **extra})


PROBE = {
    "name": "probe",
    "queue": "team-a",
    "pod_sets": [{"count": 2, "gpus": 4, "flavor": "h100"}],
    "submitted_at": "2026-11-29T09:30:00Z",
}
PROBE_PATHS = sorted(
    {tuple(keys[:end]) for _, keys, _ in leaves(PROBE) for end in range(1, len(keys) + 1)},
    key=lambda path: [str(key) for key in path],
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PROBE_PATHS), JSON_VALUES)
def test_any_value_in_a_dry_run_workload_is_answered_or_refused_never_a_crash(
    keys: tuple[Any, ...], value: Any
) -> None:
    """The dry-run's workload object, with a random value anywhere, is read and answered,
    or refused with a ScenarioError."""
    loaded = scenario_from_dict(base())
    probe: Any = copy.deepcopy(PROBE)
    target = probe
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    try:
        candidate = hypothetical_workload_from_dict(probe, loaded)
    except ScenarioError:
        return
    dry_run(loaded.snapshot, loaded.policy, loaded.now, candidate)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200) | JSON_VALUES.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_as_a_file_are_refused_never_a_crash(tmp_path_factory: Any, data: bytes) -> None:
    """Random bytes, and random JSON text, as a scenario file."""
    file = tmp_path_factory.mktemp("bytes") / "random.json"
    file.write_bytes(data)
    with pytest.raises(ScenarioError):
        load_scenario(file)


# -- huge files: refused within seconds and bounded memory --------------------------------------


def measure(action: Callable[[], object]) -> tuple[str, float, float]:
    """Run ``action``, which must raise ScenarioError: its message, seconds, peak MiB."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        action()
    except ScenarioError as error:
        message = str(error)
    else:
        raise AssertionError("not refused")
    finally:
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return message, elapsed, peak / MIB


@pytest.mark.slow
def test_a_50_mb_file_is_refused_unread(tmp_path: Path) -> None:
    """A file larger than MAX_FILE_BYTES is not read at all."""
    file = tmp_path / "huge.json"
    with file.open("w") as handle:
        handle.write('{"now": "')
        handle.write("a" * (50 * 1000 * 1000))
        handle.write('"}')
    message, elapsed, peak = measure(lambda: load_scenario(file))
    print(f"50 MB file: {elapsed:.2f} s, peak {peak:.0f} MiB")
    assert message == f"(file): larger than {MAX_FILE_BYTES // MIB} MiB"
    assert elapsed < 10 and peak < 1


@pytest.mark.slow
def test_100000_workloads_of_100000_pods_are_refused_by_the_sum(tmp_path: Path) -> None:
    """The total of pods is checked as workloads are read, before any per-pod structure is
    built: 10**10 pods are refused at the eleventh workload. (Measured under tracemalloc on
    the 2-core development machine: 3.5-6 s, 84 MiB peak.)"""
    head = json.dumps(scenario(pool(2), [queue("team-a", deserved=8)], []))
    one = (
        '{"name": "w%d", "queue": "team-a", "pod_sets": [{"count": 100000, "gpus": 1, '
        '"flavor": "h100"}], "min_member": 1, "submitted_at": "2026-11-29T09:00:00Z"}'
    )
    body = ",".join(one % index for index in range(100_000))
    file = tmp_path / "many.json"
    file.write_text(head.replace('"workloads": []', f'"workloads": [{body}]'))
    size = file.stat().st_size
    message, elapsed, peak = measure(lambda: load_scenario(file))
    print(f"100,000 workloads ({size / MIB:.0f} MiB): {elapsed:.2f} s, peak {peak:.0f} MiB")
    assert message.startswith("workloads[10].pod_sets: the workloads up to this one ask")
    assert str(MAX_TOTAL_PODS) in message
    assert elapsed < 60 and peak < 400


@pytest.mark.slow
def test_the_largest_file_of_small_values_is_refused_within_bounded_memory(
    tmp_path: Path,
) -> None:
    """Just under the file and value bounds, the costliest thing to parse -- short strings --
    is parsed and refused at the first field. (Measured: 1.7-3 s, 156 MiB peak.)"""
    count = 1_900_000
    file = tmp_path / "strings.json"
    file.write_text('{"now": [' + ",".join(['"abcdefghijklm"'] * count) + "]}")
    assert file.stat().st_size <= MAX_FILE_BYTES
    message, elapsed, peak = measure(lambda: load_scenario(file))
    print(f"{count:,} strings: {elapsed:.2f} s, peak {peak:.0f} MiB")
    assert message == "now: must be a non-empty string"
    assert elapsed < 60 and peak < 400


@pytest.mark.slow
def test_one_string_filling_the_file_is_refused_within_bounded_memory(tmp_path: Path) -> None:
    """A string of almost MAX_FILE_BYTES with one character outside the BMP (4 bytes a
    character in memory) is the worst case of text. (Measured: 0.3-0.7 s, 256 MiB peak.)"""
    file = tmp_path / "text.json"
    file.write_text('{"now": "\U0001f600' + "a" * (MAX_FILE_BYTES - 32) + '"}', encoding="utf-8")
    message, elapsed, peak = measure(lambda: load_scenario(file))
    print(f"one {MAX_FILE_BYTES // MIB} MiB string: {elapsed:.2f} s, peak {peak:.0f} MiB")
    assert message == f"now: longer than {MAX_NAME_LENGTH} characters"
    assert elapsed < 60 and peak < 400


def test_a_file_of_too_many_values_is_refused_before_parsing(tmp_path: Path) -> None:
    """Commas and opening brackets are counted first: 3 million empty lists are not built."""
    file = tmp_path / "lists.json"
    file.write_text("[" + ",".join(["[]"] * 3_000_000) + "]")
    message, _, peak = measure(lambda: load_scenario(file))
    assert message == "(file): more than 2000000 JSON values"
    assert peak < 2 * file.stat().st_size / MIB + 1


# -- the plan command: exit 2 for every bad file, the dry-run's own paths -------------------


def run_plan(*args: str) -> tuple[int, str, str]:
    """Run ``manage.py gpupool plan ARGS``; return (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("gpupool", "plan", *args, stdout=out, stderr=err)
        status = 0
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "case",
    [case for case in BAD_FILES if case.name in {"bytes that are not UTF-8", "a list at the top"}]
    + [
        BadFile(
            "NaN count",
            lambda: with_literal(["workloads", 1, "pod_sets", 0, "count"], "NaN").encode(),
            "workloads[1].pod_sets[0].count: must be an integer",
        )
    ],
    ids=lambda case: case.name,
)
def test_plan_exits_2_on_a_malformed_file_naming_the_field(tmp_path: Path, case: BadFile) -> None:
    """No plan, no traceback: one line naming the field."""
    file = tmp_path / "bad.json"
    file.write_bytes(case.content())
    status, out, err = run_plan(str(file))
    assert (status, out) == (2, "")
    assert err == f"invalid scenario: {refused(file)}\n"
    assert err.startswith(f"invalid scenario: {case.message}")


def test_plan_exits_2_on_a_missing_file(tmp_path: Path) -> None:
    """A file that cannot be read is refused like a malformed one."""
    status, _, err = run_plan(str(tmp_path / "absent.json"))
    assert status == 2 and err.startswith("invalid scenario: (file): cannot be read")


DRY_RUN_CASES = [
    (
        {
            "name": "probe",
            "queue": "team-a",
            "pod_sets": [{"count": 0, "gpus": 1, "flavor": "h100"}],
        },
        "pod_sets[0].count: must be >= 1",
    ),
    (
        {
            "name": "probe",
            "queue": "team-a",
            "pod_sets": [{"count": 1, "gpus": 1, "flavor": "h100"}],
            "submitted_at": "2026-11-29T09:00:00Z",
            "min_member": math.inf,
        },
        "min_member: must be an integer",
    ),
    (
        {
            "name": "w0",
            "queue": "team-a",
            "pod_sets": [{"count": 1, "gpus": 1, "flavor": "h100"}],
            "submitted_at": "2026-11-29T09:00:00Z",
        },
        "name: duplicate workload 'w0' (one of the scenario's)",
    ),
    ({"name": "probe", "queue": "nowhere", "pod_sets": []}, "queue: unknown queue 'nowhere'"),
    (["not", "an", "object"], "(top): must be an object"),
]


@pytest.mark.parametrize(("probe", "message"), DRY_RUN_CASES, ids=[m for _, m in DRY_RUN_CASES])
def test_a_malformed_dry_run_workload_names_its_own_fields(
    tmp_path: Path, probe: object, message: str
) -> None:
    """Errors in the dry-run's workload file name that file's paths, not the scenario's."""
    scenario_file = tmp_path / "scenario.json"
    scenario_file.write_text(json.dumps(base()))
    probe_file = tmp_path / "probe.json"
    probe_file.write_text(json.dumps(probe))
    status, out, err = run_plan(str(scenario_file), "--dry-run", str(probe_file))
    assert (status, out) == (2, "")
    assert err == f"invalid dry-run workload: {message}\n", err


def test_a_dry_run_workload_file_that_is_not_json_is_refused(tmp_path: Path) -> None:
    """The workload file is read within the same limits as the scenario."""
    scenario_file = tmp_path / "scenario.json"
    scenario_file.write_text(json.dumps(base()))
    probe_file = tmp_path / "probe.json"
    probe_file.write_bytes(b"\xff")
    status, _, err = run_plan(str(scenario_file), "--dry-run", str(probe_file))
    assert status == 2 and err.startswith("invalid dry-run workload: (file): not UTF-8")


def test_a_malformed_scenario_is_refused_before_the_dry_run_workload(tmp_path: Path) -> None:
    """With --dry-run, the scenario's own errors still name the scenario's paths."""
    scenario_file = tmp_path / "scenario.json"
    scenario_file.write_text(json.dumps({**base(), "now": "yesterday"}))
    probe_file = tmp_path / "probe.json"
    probe_file.write_text("{}")
    status, _, err = run_plan(str(scenario_file), "--dry-run", str(probe_file))
    assert status == 2 and err.startswith("invalid scenario: now: not an ISO 8601 time")
