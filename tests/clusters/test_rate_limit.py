"""The Kubernetes backend's client-side rate limit: a token bucket, as client-go's."""

from __future__ import annotations

import pytest

from gpupool.clusters.kubernetes import RateLimiter


class FakeTime:
    """A clock that sleeping moves forward."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        """The current time."""
        return self.now

    def sleep(self, seconds: float) -> None:
        """Move the clock forward."""
        self.slept.append(seconds)
        self.now += seconds


def test_a_burst_goes_at_once_and_the_rest_wait_their_turn_at_the_rate() -> None:
    time = FakeTime()
    limiter = RateLimiter(10.0, 2, clock=time.clock, sleep=time.sleep)
    waits = [limiter.wait_time() for _ in range(4)]
    assert waits == pytest.approx([0.0, 0.0, 0.1, 0.2])


def test_an_idle_bucket_refills_to_its_burst_and_no_further() -> None:
    time = FakeTime()
    limiter = RateLimiter(10.0, 3, clock=time.clock, sleep=time.sleep)
    for _ in range(3):
        limiter.acquire()
    time.now += 60.0
    assert [limiter.wait_time() for _ in range(4)] == pytest.approx([0.0, 0.0, 0.0, 0.1])


def test_requests_through_a_wrapped_call_are_paced_at_the_rate() -> None:
    time = FakeTime()
    limiter = RateLimiter(50.0, 1, clock=time.clock, sleep=time.sleep)
    call = limiter.wrap(lambda value: value * 2)
    assert [call(n) for n in range(51)] == [n * 2 for n in range(51)]
    assert time.now == pytest.approx(1.0)  # the first at once, then 50 more at 50 a second


def test_a_limit_without_rate_or_burst_is_refused() -> None:
    with pytest.raises(ValueError, match="qps > 0"):
        RateLimiter(0.0, 1)


def test_the_bucket_says_when_it_will_be_full_again() -> None:
    """What the loop's pacing asks (``allowance_full_at``): full now when nothing was sent,
    else after the missing turns refill at the rate; turns owed count as missing too."""
    time = FakeTime()
    limiter = RateLimiter(10.0, 3, clock=time.clock, sleep=time.sleep)
    assert limiter.full_at() == pytest.approx(0.0)
    time.now = 5.0
    assert limiter.full_at() == pytest.approx(5.0)  # full: nothing to wait for
    for _ in range(5):  # three from the bucket, two owed
        limiter.wait_time()
    assert limiter.full_at() == pytest.approx(5.5)
    time.now = 5.2
    assert limiter.full_at() == pytest.approx(5.5)  # asking takes nothing
