"""Control tests run on the database; ``pool`` is the small pool of control_builders."""

from __future__ import annotations

import pytest
from control_builders import Pool, build_pool


@pytest.fixture
def pool(db: None) -> Pool:
    """The small pool with every kind of thing a snapshot holds."""
    return build_pool()
