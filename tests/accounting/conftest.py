"""Cost tests run on the database; ``pool`` is the small pool of cost_builders."""

from typing import Any

import pytest
from cost_builders import Pool, build_pool


@pytest.fixture
def pool(db: Any) -> Pool:
    """Two 8-GPU h100 nodes and teams a (guarantee 6), b (guarantee 4) and c (none)."""
    return build_pool()
