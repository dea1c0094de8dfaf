"""The sync's short way for pending workloads of gpupool's own (``decide_workloads``): the
overlay ``_known`` and ``_pending`` decide, nothing else, for every mix of pods."""

from __future__ import annotations

import itertools

from gpupool.clusters.base import PodFacts, PodKey
from gpupool.clusters.grouping import WorkloadKey
from gpupool.control.cluster import POD_SET_ANNOTATION, ClusterMirror
from gpupool.control.snapshot import WorkloadRow
from gpupool.control.state import LoopState, WorkloadRows
from gpupool.control.sync import Overlay, SyncDecision, SyncMemory, _known, decide_workloads, moment
from gpupool.scheduler.types import PodSetInfo, PolicyInfo, WorkloadInfo
from gpupool.workloads.choices import Origin, WorkloadState

NOW = 1_000_000.0
OURS = {"annotations": {POD_SET_ANNOTATION: "0"}}  # made by gpupool (``made_by_gpupool``)
# A pod as the mirror may hold it: waiting, bound, ended, being deleted; or waiting, but made
# with kubectl under the workload's name (not its pod: counted by neither way, told so).
KINDS = {
    "waiting": OURS,
    "stranger": {},
    "bound": {**OURS, "node_name": "n1", "phase": "Running"},
    "done": {**OURS, "node_name": "n1", "phase": "Succeeded"},
    "failed": {**OURS, "phase": "Failed"},
    "deleting": {**OURS, "deleting": True},
    "bound-deleting": {**OURS, "node_name": "n1", "deleting": True},
}


def _row(pk: int, name: str, count: int, origin: str) -> WorkloadRow:
    info = WorkloadInfo(
        name=name,
        queue="q",
        priority_class="normal",
        pod_sets=(PodSetInfo(count=count, gpus=1, flavors=("a100",)),),
        submitted_at=NOW - 60,
    )
    return WorkloadRow(pk, info, (pk,), state=WorkloadState.PENDING, origin=origin)


def _pods(key: WorkloadKey, kinds: tuple[str, ...]) -> dict[PodKey, PodFacts]:
    pods = {}
    for index, kind in enumerate(kinds):
        pod = PodFacts(
            key.namespace, f"{key.name}-{index}", f"uid-{key.name}-{index}", **KINDS[kind]
        )  # type: ignore[arg-type]
        pods[pod.key] = pod
    return pods


def test_a_pending_workload_of_gpupool_s_own_gets_the_overlay_the_full_path_decides() -> None:
    state, mirror = LoopState(PolicyInfo()), ClusterMirror()
    rows: dict[str, WorkloadRow] = {}
    keys: list[WorkloadKey] = []
    pk = 0
    for count in (1, 2, 3):
        for size in range(4):
            for kinds in itertools.combinations_with_replacement(sorted(KINDS), size):
                pk += 1
                key = WorkloadKey("team", f"w{pk}")
                rows[str(key)] = _row(pk, str(key), count, Origin.GPUPOOL)
                if kinds:
                    mirror.pods[key] = _pods(key, kinds)
                keys.append(key)
    state.rows = WorkloadRows(rows)
    short, full = SyncMemory(), SyncMemory()
    stale = Overlay(missing_pods=9)
    short.overlays = {str(key): stale for key in keys[::3]}  # an old overlay is replaced
    full.overlays = dict(short.overlays)
    decided = SyncDecision(at=moment(NOW))
    decide_workloads(decided, mirror, state, short, keys, {}, {}, NOW)
    expected = SyncDecision(at=moment(NOW))
    for key in keys:
        _known(
            expected,
            full,
            mirror,
            rows[str(key)],
            key,
            None,
            mirror.pods_of(key),
            state,
            {},
            {},
            (),
            NOW,
            moment(NOW),
        )
    assert short.overlays == full.overlays
    assert any(o.missing_pods for o in short.overlays.values())
    assert len(short.overlays) < len(keys)  # some lack no pod: no overlay
    # The same decision both ways (the short way in its own order of keys): nothing but a
    # Warning Event on the strangers of each workload that has some.
    assert sorted(decided.events, key=repr) == sorted(expected.events, key=repr)
    told = {event.pods[0].name.rsplit("-", 1)[0] for event in decided.events}
    assert told == {key.name for key in keys if any(not p.annotations for p in mirror.pods_of(key))}
    decided.events.clear()
    expected.events.clear()
    assert decided == expected == SyncDecision(at=moment(NOW))
