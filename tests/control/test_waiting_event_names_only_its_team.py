"""The Waiting Event on a pending workload's pods is read by its own team (``kubectl
describe pod``): a sentence naming another team's workload -- capacity held for it -- says
"another team's workload" there, as the API and the pages say it to that team
(``workloads.queries.TeamSees``, ``NamesSeen``'s rule); a workload of its own team is named."""

from __future__ import annotations

import types
from datetime import UTC, datetime

from gpupool.control.loop import ControlLoop
from gpupool.control.record import CycleRecord, Explanation
from gpupool.scheduler.explain import NO_UNITS
from gpupool.workloads.queries import ANOTHER_TEAMS_WORKLOAD

HELD = {"held_for": "team-b/big", "held_because": "nominated", "queue": "team-a"}
DETAIL = "Capacity is held for team-b/big, which waits for the workloads it evicted to leave."


def told(waiting: str, *, ranked: bool) -> str:
    """What ``waiting``'s pods are told, its explanation the one above (its rank known or
    not: the sentence rendered with its position, or as written)."""
    loop = ControlLoop.__new__(ControlLoop)
    loop.written = {}
    loop._namespaces = {"team-a": "a", "team-b": "b", "team-b2": "b"}
    row = types.SimpleNamespace(
        id=1, info=types.SimpleNamespace(name=waiting, queue=waiting.partition("/")[0])
    )
    loop.state = types.SimpleNamespace(names={1: waiting}, rows={waiting: row})
    record = CycleRecord(at=datetime(2026, 12, 7, tzinfo=UTC))
    record.explanations[1] = Explanation("behind", DETAIL, HELD)
    if ranked:
        record.ranked[1] = 1.0
        record.ranks_by_queue[row.info.queue] = [1.0]
    return loop._told(record, NO_UNITS)(row, DETAIL)  # type: ignore[arg-type]


def test_another_teams_workload_is_not_named_on_a_pods_event() -> None:
    for ranked in (False, True):
        words = told("team-a/small", ranked=ranked)
        assert "team-b/big" not in words and ANOTHER_TEAMS_WORKLOAD in words, words


def test_a_workload_of_the_pods_own_team_is_named() -> None:
    for ranked in (False, True):
        assert "team-b/big" in told("team-b2/small", ranked=ranked)
