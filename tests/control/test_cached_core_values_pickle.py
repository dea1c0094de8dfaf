"""The pages' cache keeps the core's values between requests (``control.queries``): each
must come back from pickle equal, with the compiled core too (its frozen classes cannot be
unpickled field by field, which once answered 500 on /api/v1/queues/)."""

from __future__ import annotations

import pickle

import gpupool.control.queries  # noqa: F401  (registers how the core's values pickle)
from gpupool.scheduler.shares import QueueShare
from gpupool.scheduler.types import FlavorInfo, PolicyInfo


def test_the_core_values_the_cache_keeps_come_back_from_pickle_equal() -> None:
    for value in (QueueShare(1000, 250, 0), PolicyInfo(), FlavorInfo("h100")):
        assert pickle.loads(pickle.dumps(value)) == value  # noqa: S301 (our own bytes)
