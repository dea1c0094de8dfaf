"""A reader of explanations cannot be called without saying who reads.

``seen=None`` meant "as written" in ``workloads.queries``' readers (``sentence``,
``current_sentence``, ``summary``, ``explain``, ``dry_run_submission``): a new page, API field
or command that forgot to pass its viewer showed other teams' workload names (the workload
capacity is held for, a preemptor's victims). The viewer is now a required argument with no
default -- ``NamesSeen(access)`` for a person, ``TeamSees`` for a team's pods, ``AS_WRITTEN``
said outright by an internal caller that needs the raw text -- and None is refused."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import UTC
from typing import Any

import pytest
from domain_builders import explained
from two_teams import STARVING_FOR_VISION, Pool, nlp_and_vision, submit

from gpupool.api.access import access_of
from gpupool.inventory.units import FlavorUnits
from gpupool.scheduler.explain import NO_UNITS, Verdict, explanation
from gpupool.workloads import queries
from gpupool.workloads.queries import (
    ANOTHER_TEAMS_WORKLOAD,
    AS_WRITTEN,
    NamesSeen,
    current_sentence,
    dry_run_submission,
    explain,
    sentence,
    sentence_seen_by,
    summary,
)

READERS: list[Callable[..., Any]] = [
    sentence,
    sentence_seen_by,
    current_sentence,
    summary,
    explain,
    dry_run_submission,
]
WRITTEN = explanation("", Verdict("behind", STARVING_FOR_VISION), 1).detail


@pytest.mark.parametrize("reader", READERS, ids=lambda reader: reader.__name__)
def test_each_reader_takes_its_viewer_without_a_default(reader: Callable[..., Any]) -> None:
    seen = inspect.signature(reader).parameters["seen"]
    assert seen.default is inspect.Parameter.empty, reader


def test_no_function_of_the_queries_defaults_its_viewer() -> None:
    """Whatever reader is added to the module: a ``seen`` without a default."""
    defaulted = [
        name
        for name, function in inspect.getmembers(queries, inspect.isfunction)
        if function.__module__ == queries.__name__
        and "seen" in (parameters := inspect.signature(function).parameters)
        and parameters["seen"].default is not inspect.Parameter.empty
    ]
    assert defaulted == []


def test_a_sentence_without_its_viewer_is_refused() -> None:
    with pytest.raises(TypeError):
        sentence("behind", STARVING_FOR_VISION, 1, WRITTEN)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        sentence("behind", STARVING_FOR_VISION, 1, WRITTEN, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        sentence_seen_by(WRITTEN, STARVING_FOR_VISION, None)  # type: ignore[arg-type]
    # said outright, the words as the core wrote them
    assert (
        sentence("behind", STARVING_FOR_VISION, 1, WRITTEN, AS_WRITTEN, units=NO_UNITS, zone=UTC)
        == WRITTEN
    )
    assert sentence_seen_by(WRITTEN, STARVING_FOR_VISION, AS_WRITTEN) == WRITTEN


@pytest.fixture
def pool(db: Any) -> Pool:
    return nlp_and_vision()


def test_a_workloads_readers_without_their_viewer_are_refused(pool: Pool) -> None:
    waiting = submit(pool, "waiting", pool.nlp_queue, "max")
    explained(waiting, "behind", WRITTEN, STARVING_FOR_VISION, queue_rank=1.0)
    units = FlavorUnits()
    for call in (
        lambda: explain(waiting, units=units),  # type: ignore[call-arg]
        lambda: summary(waiting, units=units),  # type: ignore[call-arg]
        lambda: current_sentence(waiting, units=units),  # type: ignore[call-arg]
        lambda: explain(waiting, seen=None, units=units),  # type: ignore[arg-type]
        lambda: summary(waiting, seen=None, units=units),  # type: ignore[arg-type]
    ):
        with pytest.raises(TypeError):
            call()
    # nor positionally, where the viewer once was
    viewer = NamesSeen(access_of(pool.users["max"]))
    with pytest.raises(TypeError):
        explain(waiting, UTC, None, viewer, units=units)  # type: ignore[call-arg]
    member = explain(waiting, seen=NamesSeen(access_of(pool.users["max"])), units=units)
    assert "vision/big" not in member.detail + member.summary
    assert ANOTHER_TEAMS_WORKLOAD in member.detail
    raw = explain(waiting, seen=AS_WRITTEN, units=units)
    assert "vision/big" in raw.detail and raw.facts["held_for"] == "vision/big"
