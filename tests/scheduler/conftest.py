"""Decision-core tests: plain pytest, no database. Builders live in scheduler_builders.py."""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("scheduler", max_examples=60, deadline=None)
