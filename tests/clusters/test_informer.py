"""The informer lists, follows a watch, re-lists on 410 Gone and backs off, against a script.

These pin the reflector's logic on a scripted source; test_kubernetes_backend.py proves the
same against the real API server (410 after a restart, a restart mid-watch).
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gpupool.clusters.base import Change
from gpupool.clusters.informer import (
    Backoff,
    Delete,
    Informer,
    JsonObject,
    Replace,
    Store,
    Upsert,
    WatchFailed,
    added,
)

FAST = Backoff(initial_s=0.01, maximum_s=0.05, jitter=0.0)


def obj(name: str, value: int, version: str = "1") -> dict[str, Any]:
    """A minimal object: a name, a value, a resourceVersion."""
    return {"metadata": {"name": name, "resourceVersion": version}, "value": value}


def decode(o: JsonObject) -> tuple[str, int | None]:
    value = o["value"]
    if value == "broken":
        raise ValueError("broken object")
    return o["metadata"]["name"], value


class ScriptedWatch:
    """A watch that yields its events, then ends (or waits to be aborted when ``hold``)."""

    def __init__(
        self, events: list[dict[str, Any]] | Exception, hold: bool, gate: threading.Event
    ) -> None:
        self._events = events
        self._hold = hold
        self._gate = gate
        self._aborted = threading.Event()

    def __enter__(self) -> ScriptedWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def events(self) -> Iterator[JsonObject]:
        self._gate.wait(10)
        if isinstance(self._events, Exception):
            raise self._events
        yield from self._events
        if self._hold:
            self._aborted.wait(10)
            raise WatchFailed("aborted")

    def abort(self) -> None:
        self._aborted.set()


class ScriptedSource:
    """Lists and watches played from a script; the last watch holds until aborted."""

    def __init__(
        self,
        lists: list[tuple[list[dict[str, Any]], str]],
        watches: list[list[dict[str, Any]] | Exception],
    ) -> None:
        self.lists = list(lists)
        self.watches = list(watches)
        self.watched_from: list[str] = []
        self.listed = 0
        self.gate = threading.Event()  # watches play their events once it is set
        self.gate.set()

    def list_page(self, limit: int, continue_token: str | None) -> JsonObject:
        items, version = self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]
        self.listed += 1
        return {"items": items, "metadata": {"resourceVersion": version}}

    def watch(self, resource_version: str, timeout_s: int) -> ScriptedWatch:
        self.watched_from.append(resource_version)
        script: list[dict[str, Any]] | Exception = self.watches.pop(0) if self.watches else []
        return ScriptedWatch(script, hold=not self.watches, gate=self.gate)


def wait_for(what: str, probe: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def run(source: ScriptedSource, until: Callable[[Informer[str, int]], bool]) -> Informer[str, int]:
    informer: Informer[str, int] = Informer("things", source, decode, backoff=FAST)
    informer.start()
    try:
        wait_for("the script to play", lambda: until(informer))
    finally:
        informer.stop()
    return informer


def test_the_informer_lists_then_follows_the_watch() -> None:
    source = ScriptedSource(
        [([obj("a", 1), obj("b", 2)], "10")],
        [[{"type": "ADDED", "object": obj("c", 3, "11")},
          {"type": "MODIFIED", "object": obj("a", 9, "12")},
          {"type": "DELETED", "object": obj("b", 2, "13")}]],
    )  # fmt: skip
    informer = run(source, lambda i: i.resource_version == "13")
    drained = informer.drain()
    assert dict(informer.items) == {"a": 9, "c": 3}
    assert drained.changes == {"a": Change(None, 9), "c": Change(None, 3)}  # first drain: added
    assert drained.relisted
    assert source.watched_from == ["10"]


def test_an_expired_version_is_relisted_and_the_gap_is_diffed() -> None:
    source = ScriptedSource(
        [([obj("a", 1), obj("b", 2)], "10"), ([obj("a", 5), obj("c", 3)], "20")],
        [[{"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}}],
         []],
    )  # fmt: skip
    source.gate.clear()
    informer: Informer[str, int] = Informer("things", source, decode, backoff=FAST)
    informer.start()
    wait_for("the first list", lambda: informer.relists == 1)
    first = informer.drain()
    assert set(first.changes) == {"a", "b"}
    source.gate.set()
    wait_for("the re-list", lambda: informer.relists == 2 and source.watched_from[-1:] == ["20"])
    informer.stop()
    second = informer.drain()
    assert second.changes == {"a": Change(1, 5), "b": Change(2, None), "c": Change(None, 3)}
    assert second.relisted
    assert informer.expirations == 1
    assert source.watched_from == ["10", "20"]


def test_a_bookmark_moves_the_resource_version_and_a_watch_resumes_from_it() -> None:
    source = ScriptedSource(
        [([], "10")],
        [[{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}}], []],
    )
    run(source, lambda i: len(source.watched_from) == 2)
    assert source.watched_from == ["10", "15"]
    assert source.listed == 1  # resuming a watch never re-lists


def test_failures_back_off_and_the_watch_resumes_where_it_was() -> None:
    source = ScriptedSource(
        [([obj("a", 1)], "10")],
        [WatchFailed("connection refused"), WatchFailed("connection refused"),
         [{"type": "MODIFIED", "object": obj("a", 2, "11")}]],
    )  # fmt: skip
    informer = run(source, lambda i: i.resource_version == "11")
    assert source.watched_from == ["10", "10", "10"]
    assert source.listed == 1
    assert informer.drain().changes == {"a": Change(None, 2)}


def test_an_object_that_cannot_be_read_is_skipped_not_fatal() -> None:
    source = ScriptedSource(
        [([obj("a", 1), obj("bad", "broken")], "10")],
        [[{"type": "ADDED", "object": obj("b", 2, "11")}]],
    )
    informer = run(source, lambda i: i.resource_version == "11")
    informer.drain()
    assert dict(informer.items) == {"a": 1, "b": 2}


def test_objects_the_decoder_rejects_for_good_are_dropped_and_wake_nobody() -> None:
    """The Jobs informer's case: a Job of another scheduler's pods (the decoder's None) is
    never ours, so its events neither reach the store nor set the change signal."""
    source = ScriptedSource(
        [([obj("a", 1), obj("theirs", None)], "10")],  # type: ignore[arg-type]
        [[{"type": "MODIFIED", "object": obj("theirs", None, "11")},  # type: ignore[arg-type]
          {"type": "DELETED", "object": obj("theirs", None, "12")}]],  # type: ignore[arg-type]
    )  # fmt: skip
    changed = threading.Event()
    informer: Informer[str, int] = Informer(
        "jobs", source, decode, backoff=FAST, changed=changed, drop_rejected=True
    )
    source.gate.clear()  # the watch plays its events once the list is in
    informer.start()
    try:
        assert informer.wait_listed(10)
        changed.clear()  # the list set it
        source.gate.set()
        wait_for("the script to play", lambda: informer.resource_version == "12")
    finally:
        informer.stop()
    assert not changed.is_set()  # the rejected object's events woke nobody
    assert informer.drain().changes == {"a": Change(None, 1)}


def test_each_queued_watch_event_is_told_as_it_comes_but_not_the_lists_or_rejections() -> None:
    """``on_event`` (what the Kubernetes backend's arrivals are read from) hears every watch
    event queued for the consumer, with its type, key and value, before any drain; a list and
    a rejected object's events are not told."""
    source = ScriptedSource(
        [([obj("a", 1)], "10")],
        [[{"type": "ADDED", "object": obj("b", 2, "11")},
          {"type": "MODIFIED", "object": obj("theirs", None, "12")},  # type: ignore[arg-type]
          {"type": "MODIFIED", "object": obj("a", 3, "13")},
          {"type": "DELETED", "object": obj("b", 2, "14")}]],
    )  # fmt: skip
    told: list[tuple[str, str, int | None]] = []
    informer: Informer[str, int] = Informer(
        "pods",
        source,
        decode,
        backoff=FAST,
        drop_rejected=True,
        on_event=lambda kind, key, value: told.append((kind, key, value)),
    )
    informer.start()
    try:
        wait_for("the script to play", lambda: informer.resource_version == "14")
    finally:
        informer.stop()
    assert told == [("ADDED", "b", 2), ("MODIFIED", "a", 3), ("DELETED", "b", 2)]


def test_a_change_undone_before_the_drain_is_no_change() -> None:
    store: Store[str, int] = Store()
    store.apply(Replace({"a": 1}))
    store.take_changes()
    store.apply(Upsert("b", 2))
    store.apply(Delete("b"))
    store.apply(Upsert("a", 3))
    store.apply(Upsert("a", 1))
    assert store.take_changes() == {}


def test_backoff_grows_to_its_bound() -> None:
    backoff = Backoff(initial_s=0.2, factor=2.0, maximum_s=1.0, jitter=0.0)
    rng = random.Random(0)
    assert [backoff.delay(n, rng) for n in (1, 2, 3, 4, 10)] == [0.2, 0.4, 0.8, 1.0, 1.0]


def test_an_added_change_built_through_its_slots_is_the_constructor_s() -> None:
    # ``added`` (a first list's 35,000 objects) skips the frozen dataclass's ``__init__``.
    for after in ("pod", 3, ("a", "b")):
        made = added(after)
        assert type(made) is Change
        assert made == Change(None, after)
        assert hash(made) == hash(Change(None, after))
        assert (made.before, made.after, made.kind) == (None, after, "added")
    with pytest.raises(dataclasses.FrozenInstanceError):
        added("pod").after = "other"  # type: ignore[misc]
