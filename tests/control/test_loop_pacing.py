"""When ``gpupool loop`` starts its next cycle (``runner.wait_next_cycle``): at the interval
when nothing changes; after a change, at the end of a batching window that a pause in the
arrival of new pods cuts short (``docs/control-loop.md`` "Running it")."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, cast

import pytest
from django.conf import settings as django_settings

from gpupool.clusters.base import Allowance, Arrivals, ClusterBackend
from gpupool.clusters.kubernetes import RateLimiter
from gpupool.control.runner import (
    LEAD_FACTOR,
    RAMP_FACTOR,
    STREAM_MIN,
    next_cycle_lead,
    wait_next_cycle,
)

BATCH_S = 0.6
QUIET_S = 0.1
PAUSE_GAPS = 6.0  # GPUPOOL_CYCLE_PAUSE_GAPS's default


class Changes:
    """The two things the wait asks a backend: whether the pods changed since the last sync
    (``wait_for_change``) and which new pods arrived (``arrivals``), set by the test as a
    watch would."""

    def __init__(self, limiter: RateLimiter | None = None, *, since: float = 0.0) -> None:
        self.changed = threading.Event()
        self.arrived = Arrivals(since=since)  # ``since``: the last sync, as a backend's
        self.limiter = limiter  # the client's allowance, as the Kubernetes backend's

    def change(self, *, arrival: bool) -> None:
        if arrival:
            self.arrived = self.arrived.then(time.monotonic())
        self.changed.set()

    def wait_for_change(self, timeout_s: float) -> bool:
        return self.changed.wait(max(timeout_s, 0.0))

    def arrivals(self) -> Arrivals:
        return self.arrived

    def allowance(self) -> Allowance | None:
        limiter = self.limiter
        return None if limiter is None else Allowance(limiter.qps, limiter.burst, limiter.full_at())


def waited(
    changes: Changes,
    *,
    started: float,
    due: float,
    stop: threading.Event | None = None,
    lead_s: float = 0.0,
    pause_gaps: float | None = PAUSE_GAPS,
) -> float:
    """When the wait ended (monotonic)."""
    wait_next_cycle(
        cast(ClusterBackend, changes),
        stop or threading.Event(),
        due,
        True,
        started=started,
        batch_s=BATCH_S,
        quiet_s=QUIET_S,
        pause_gaps=pause_gaps,
        lead_s=lead_s,
    )
    return time.monotonic()


def waited_in_stream(
    *, every_s: float, limiter: RateLimiter | None = None, lead_s: float = 0.0, before: int = 0
) -> tuple[float, float]:
    """A pod arrives now and then every ``every_s`` until the wait ends: (start, end); with
    ``before``, that many came at the same pace since the last sync."""
    changes = Changes(limiter)
    if before:
        now = time.monotonic()
        changes.arrived = Arrivals(before, now - before * every_s, now - every_s)
    stop_arriving = threading.Event()

    def arrive() -> None:
        while not stop_arriving.wait(every_s):
            changes.change(arrival=True)

    started = time.monotonic()
    changes.change(arrival=True)
    arrivals = threading.Thread(target=arrive)
    arrivals.start()
    try:
        ended = waited(changes, started=started, due=started + 60.0, lead_s=lead_s)
    finally:
        stop_arriving.set()
        arrivals.join()
    return started, ended


def test_nothing_changing_waits_for_the_interval() -> None:
    started = time.monotonic()
    ended = waited(Changes(), started=started, due=started + 0.8)
    assert ended >= started + 0.8


def test_a_lone_pod_starts_a_cycle_quiet_s_after_it_arrives() -> None:
    changes = Changes()
    started = time.monotonic() - 10.0  # the last cycle was long ago
    timer = threading.Timer(0.2, changes.change, kwargs={"arrival": True})
    timer.start()
    ended = waited(changes, started=started, due=started + 60.0)
    assert changes.arrived.count == 1
    assert changes.arrived.last + QUIET_S <= ended < changes.arrived.last + BATCH_S


def test_a_burst_of_pods_is_batched_until_the_window_ends() -> None:
    """Pods arriving every 20 ms (never a pause of QUIET_S): one cycle per BATCH_S."""
    started, ended = waited_in_stream(every_s=0.02)
    assert started + BATCH_S <= ended < started + BATCH_S + 0.5


def test_the_end_of_a_burst_starts_the_cycle_before_the_window_ends() -> None:
    changes = Changes()
    started = time.monotonic()
    for _ in range(5):  # a short burst right after the last cycle started
        changes.change(arrival=True)
        time.sleep(0.02)
    last = changes.arrived.last
    ended = waited(changes, started=started, due=started + 60.0)
    assert last + QUIET_S <= ended < started + BATCH_S


def test_a_slow_stream_s_ordinary_gaps_do_not_end_the_window() -> None:
    """Pods every 40 ms (each gap longer than QUIET_S): a pause is PAUSE_GAPS mean gaps, so
    the window runs its length; once the stream stops, the cycle starts that pause later."""
    started, ended = waited_in_stream(every_s=0.04)
    assert ended >= started + BATCH_S
    assert PAUSE_GAPS * 0.04 > QUIET_S  # the rule this test is about


def waited_over_a_stall() -> tuple[float, float]:
    """Pods every 20 ms, then none for 10 gaps (longer than QUIET_S), then again every 20 ms
    until the wait ends, with ``GPUPOOL_CYCLE_PAUSE_GAPS``: (start, end)."""
    changes = Changes()
    started = time.monotonic()
    stop_arriving = threading.Event()

    def arrive() -> None:
        for at in [*range(0, 160, 20), *range(160 + 10 * 20, 1000, 20)]:
            if stop_arriving.wait(max(started + at / 1000 - time.monotonic(), 0.0)):
                return
            changes.change(arrival=True)

    arrivals = threading.Thread(target=arrive)
    arrivals.start()
    try:
        ended = waited(changes, started=started, due=started + 60.0, pause_gaps=None)
    finally:
        stop_arriving.set()
        arrivals.join()
    return started, ended


def test_a_stall_of_more_than_pause_gaps_ends_the_window_as_an_end_would() -> None:
    """10 gaps without a pod, over the default 6: the window ends at the stall (the loop
    cannot tell a client's stall from the stream's end; the end is bound soon)."""
    started, ended = waited_over_a_stall()
    assert QUIET_S < 10 * 0.02 and django_settings.GPUPOOL_CYCLE_PAUSE_GAPS == PAUSE_GAPS < 10
    assert started + 0.14 + QUIET_S <= ended < started + BATCH_S


def test_more_pause_gaps_let_a_stall_pass_without_a_cycle(settings: Any) -> None:
    """``GPUPOOL_CYCLE_PAUSE_GAPS`` 12: the same stall of 10 gaps does not end the window,
    which runs its length (a cycle saved for the few pods before the stall)."""
    settings.GPUPOOL_CYCLE_PAUSE_GAPS = 12.0
    started, ended = waited_over_a_stall()
    assert ended >= started + BATCH_S


def test_pods_bound_or_ended_start_a_cycle_when_the_window_ends() -> None:
    """No new pod waits for a node: nothing to hurry for, the window runs its length."""
    changes = Changes()
    started = time.monotonic()
    changes.change(arrival=False)
    ended = waited(changes, started=started, due=started + 60.0)
    assert ended >= started + BATCH_S


def test_a_cycle_longer_than_the_window_is_followed_quiet_s_after_the_change() -> None:
    """The window is counted from the last cycle's start: a slow cycle leaves no window, but
    the next one still waits QUIET_S after the change it woke for."""
    changes = Changes()
    started = time.monotonic() - 2 * BATCH_S
    changes.change(arrival=False)
    woke = time.monotonic()
    ended = waited(changes, started=started, due=started + 60.0)
    assert woke + QUIET_S <= ended < woke + BATCH_S


def test_stop_ends_the_wait_at_once() -> None:
    changes = Changes()
    stop = threading.Event()
    started = time.monotonic()
    changes.change(arrival=False)
    threading.Timer(0.1, stop.set).start()
    ended = waited(changes, started=started, due=started + 60.0, stop=stop)
    assert ended < started + BATCH_S


def drained(qps: float, burst: int, taken: int) -> RateLimiter:
    """A client limit whose bucket ``taken`` requests have just drawn on."""
    limiter = RateLimiter(qps, burst)
    for _ in range(taken):
        limiter.wait_time()
    return limiter


def test_after_an_idle_spell_the_first_new_pod_starts_a_cycle_at_once() -> None:
    """The client's allowance is full: every moment waited is requests lost, so no window."""
    changes = Changes(RateLimiter(100.0, 200))
    started = time.monotonic() - 10.0  # the last cycle was long ago
    # The loop has waited a window's length (and more) with nothing changing.
    timer = threading.Timer(BATCH_S + 0.1, changes.change, kwargs={"arrival": True})
    timer.start()
    ended = waited(changes, started=started, due=started + 60.0, lead_s=0.3)
    assert changes.arrived.count == 1
    assert changes.arrived.last <= ended < changes.arrived.last + QUIET_S


def test_a_lone_pod_soon_after_a_cycle_waits_quiet_s_with_the_allowance_full() -> None:
    """No quiet spell (the pod came as the wait began, after a cycle of 2 s): one pod is no
    stream faster than the limit, so it is batched as before (a slow stream's cycles do not
    follow each other)."""
    changes = Changes(RateLimiter(100.0, 200))
    started = time.monotonic() - 2.0
    changes.change(arrival=True)
    ended = waited(changes, started=started, due=started + 60.0, lead_s=0.3)
    assert ended >= changes.arrived.last + QUIET_S


def test_a_clump_of_a_few_pods_is_no_stream_faster_than_the_limit() -> None:
    """Three pods at once (clients make pods in clumps) after a cycle: fewer than STREAM_MIN
    say nothing of a rate, so the window runs as before (the end of the clump ends it)."""
    changes = Changes(RateLimiter(100.0, 200))
    started = time.monotonic()
    for _ in range(3):
        changes.change(arrival=True)
    ended = waited(changes, started=started, due=started + 60.0, lead_s=0.3)
    assert STREAM_MIN > 3  # the rule this test is about
    assert ended >= changes.arrived.last + QUIET_S


def test_new_pods_end_the_window_lead_s_before_the_allowance_is_full() -> None:
    """A stream faster than the limit (50 a second against 20) that never pauses, the bucket
    0.5 s from full, the next cycle 0.2 s long: the cycle starts 0.3 s in, before the
    window's BATCH_S, so its bindings find the turns."""
    limiter = drained(20.0, 40, 10)
    started, ended = waited_in_stream(every_s=0.02, limiter=limiter, lead_s=0.2, before=STREAM_MIN)
    assert started + 0.3 - 0.05 <= ended < started + BATCH_S


def test_a_burst_is_batched_once_its_bindings_have_drawn_the_allowance_down() -> None:
    """The bucket far from full (the bindings wait for the limit anyway): the window runs."""
    limiter = drained(20.0, 40, 40)
    started, ended = waited_in_stream(every_s=0.02, limiter=limiter, lead_s=0.2, before=STREAM_MIN)
    assert started + BATCH_S <= ended < started + BATCH_S + 0.5


def test_a_stream_slower_than_the_limit_is_batched_with_the_allowance_full() -> None:
    """40 pods a second against a limit of 100, less than half of it: the bucket stays full
    whatever the loop does (its lost turns are never needed), so the cycles keep their
    window."""
    limiter = RateLimiter(100.0, 200)
    assert RAMP_FACTOR < 0.025 * 100.0  # no ramp: the case this test is about
    started, ended = waited_in_stream(every_s=0.025, limiter=limiter, lead_s=0.2, before=STREAM_MIN)
    assert started + BATCH_S <= ended < started + BATCH_S + 0.5


def test_a_burst_s_ramp_waits_a_lead_at_most_with_the_allowance_full() -> None:
    """60 pods a second against a limit of 100, the bucket full: slower than the limit but
    more than half of it, as a burst's first moments are while its clients speed up. The
    first pod waits the lead (0.2 s), not the window (B4: a binder late where the stream's
    pace passes the limit's is late by that for good)."""
    limiter = RateLimiter(100.0, 200)
    every_s = 1 / 60
    assert 1.0 < every_s * 100.0 <= RAMP_FACTOR  # a ramp: the case this test is about
    started = time.monotonic()
    changes = Changes(limiter, since=started)
    stop_arriving = threading.Event()

    def arrive() -> None:
        while not stop_arriving.wait(every_s):
            changes.change(arrival=True)

    arrivals = threading.Thread(target=arrive)
    arrivals.start()
    try:
        ended = waited(changes, started=started, due=started + 60.0, lead_s=0.2)
    finally:
        stop_arriving.set()
        arrivals.join()
    first = changes.arrived.first
    assert first + 0.2 - 0.02 <= ended < first + 0.2 + 0.25 < started + BATCH_S


def test_a_ramp_with_room_in_the_bucket_is_batched() -> None:
    """The same ramp, the bucket drawn far from full (the bindings wait for the limit
    anyway): the window runs its length."""
    limiter = drained(100.0, 200, 150)
    started, ended = waited_in_stream(
        every_s=1 / 60, limiter=limiter, lead_s=0.2, before=STREAM_MIN
    )
    assert started + BATCH_S <= ended < started + BATCH_S + 0.5


def test_pods_bound_or_ended_do_not_hurry_for_a_full_allowance() -> None:
    """No new pod waits for a node: nothing to bind, the window runs its length."""
    changes = Changes(RateLimiter(100.0, 200))
    started = time.monotonic()
    changes.change(arrival=False)
    ended = waited(changes, started=started, due=started + 60.0, lead_s=0.3)
    assert ended >= started + BATCH_S


def waited_in_clumps(
    *, clump: int, every_s: float, limiter: RateLimiter, lead_s: float
) -> tuple[float, float]:
    """``clump`` pods at once every ``every_s``, the first clump ``every_s`` after the last
    cycle's sync (as a watch hands pods on), until the wait ends: (start, end)."""
    started = time.monotonic()
    changes = Changes(limiter, since=started)
    stop_arriving = threading.Event()

    def arrive() -> None:
        while not stop_arriving.wait(every_s):
            for _ in range(clump):
                changes.change(arrival=True)

    arrivals = threading.Thread(target=arrive)
    arrivals.start()
    try:
        ended = waited(changes, started=started, due=started + 60.0, lead_s=lead_s)
    finally:
        stop_arriving.set()
        arrivals.join()
    return started, ended


def test_the_pace_of_arrivals_counts_from_the_sync_not_from_the_first_of_a_clump() -> None:
    clump = Arrivals(count=8, first=10.0, last=10.007, since=9.9)
    assert clump.mean_gap == pytest.approx(0.001)  # within the clump
    assert clump.stream_gap == pytest.approx(0.107 / 8)  # the stream's: 75 a second
    assert Arrivals(8, 10.0, 10.007).stream_gap == clump.mean_gap  # no sync known


def test_a_stream_slower_than_the_limit_in_clumps_is_batched_with_the_allowance_full() -> None:
    """7 pods at once every 40 ms (175 a second) against a limit of 400, the bucket full:
    between the first and the last pod seen the gaps are shorter than the limit's (the
    stretch before the first clump and within the last are left out), but the stream is
    slower than half the limit (no ramp), so its lost turns are never needed and the window
    runs (B4's trickle: otherwise a cycle every few clumps, each with its fixed cost)."""
    started, ended = waited_in_clumps(
        clump=7, every_s=0.04, limiter=RateLimiter(400.0, 800), lead_s=0.2
    )
    assert 400.0 / RAMP_FACTOR > 7 / 0.04 and STREAM_MIN <= 2 * 7  # the case of this test
    assert started + BATCH_S <= ended < started + BATCH_S + 0.5


def test_a_stream_faster_than_the_limit_in_clumps_ends_the_window_lead_s_before_full() -> None:
    """The same clumps against a limit of 20 whose bucket is 0.5 s from full, the next cycle
    0.2 s long: the cycle starts 0.3 s in, as for an even stream."""
    started, ended = waited_in_clumps(
        clump=5, every_s=0.04, limiter=drained(20.0, 40, 10), lead_s=0.2
    )
    assert started + 0.3 - 0.05 <= ended < started + BATCH_S


def test_the_pod_that_makes_a_stream_ends_the_window_a_poll_after_it_not_quiet_s() -> None:
    """After a cycle (no quiet spell), the bucket full: a clump of STREAM_MIN - 1 pods says
    nothing of a rate, but the next pod makes them a stream faster than the limit, and its
    turns are being lost: the window ends a poll after it (POLL_S), not at the next look a
    QUIET_S later."""
    started = time.monotonic()
    changes = Changes(RateLimiter(100.0, 200), since=started)
    for _ in range(STREAM_MIN - 1):
        changes.change(arrival=True)
    timer = threading.Timer(0.02, changes.change, kwargs={"arrival": True})
    timer.start()
    ended = waited(changes, started=started, due=started + 60.0, lead_s=0.1)
    timer.join()
    assert changes.arrived.count == STREAM_MIN
    assert ended < changes.arrived.last + QUIET_S / 2


def test_a_next_cycle_longer_than_the_last_still_binds_before_the_bucket_is_full() -> None:
    """A stream faster than the limit, the bucket 0.5 s from full, the last cycle 0.2 s to
    its bindings; the next one takes the pods that came meanwhile and runs 0.3 s. Reckoned
    at the last cycle's length it would start 0.3 s in and bind at 0.6 s, 0.1 s of turns
    after the bucket filled; reckoned twice over (``next_cycle_lead``) it starts by 0.1 s
    in and binds before."""
    assert next_cycle_lead(0.2) == pytest.approx(LEAD_FACTOR * 0.2) == pytest.approx(0.4)
    limiter = drained(20.0, 40, 10)
    started, ended = waited_in_stream(
        every_s=0.02, limiter=limiter, lead_s=next_cycle_lead(0.2), before=STREAM_MIN
    )
    assert ended + 0.3 <= started + 0.5  # the longer cycle's bindings find the turns


def test_the_window_logs_at_debug_what_ended_it(caplog: pytest.LogCaptureFixture) -> None:
    """What an operator tuning GPUPOOL_CYCLE_* reads (LOG_LEVEL=DEBUG): why each cycle
    started when it did."""
    caplog.set_level(logging.DEBUG, logger="gpupool.control.runner")
    waited_in_stream(every_s=0.02, limiter=drained(20.0, 40, 10), lead_s=0.2, before=STREAM_MIN)
    changes = Changes()
    changes.change(arrival=True)
    waited(changes, started=time.monotonic() - 10.0, due=time.monotonic() + 60.0)
    changes = Changes()
    changes.change(arrival=False)
    waited(changes, started=time.monotonic(), due=time.monotonic() + 60.0)

    ends = [r.getMessage() for r in caplog.records if r.getMessage().startswith("window of ")]
    assert len(ends) == 3
    assert "ended by a stream faster than the limit, the client's bucket full" in ends[0]
    assert "ended by the new pods paused: 1 new pods" in ends[1]
    assert "ended by the window's length: 0 new pods" in ends[2]
    assert "bucket full in -" in ends[1]  # no client limit: nothing to be full
