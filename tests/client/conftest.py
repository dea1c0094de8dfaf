"""Fixtures of the client tests: the client run against the test's live server.

``live_client`` points the client at the live server, its config kept under the test's
``tmp_path``, from an empty cache (cycle ids repeat between tests), and gives ``log_in(user)``,
which hands the client that user's token. ``lena`` leads tenant nlp (no queue) and is logged
in. ``nowhere`` points the client at a server that answers nothing (``client_cli.NOWHERE``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from client_cli import NOWHERE
from django.core.cache import cache
from domain_builders import tenant, user

from gpupool.api.actions import do_issue_token


@pytest.fixture
def live_client(
    live_server: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> Callable[[Any], None]:
    """The client talks to the live server and keeps its config under ``tmp_path``; the cache
    is emptied first. Returns ``log_in(user)``: the client then uses ``user``'s token."""
    cache.clear()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("GPUPOOL_URL", live_server.url)

    def log_in(who: Any) -> None:
        monkeypatch.setenv("GPUPOOL_TOKEN", do_issue_token(who).key)

    return log_in


@pytest.fixture
def lena(live_client: Callable[[Any], None]) -> Any:
    """lena leads tenant nlp (no queue); the client talks to the live server with her token."""
    lead = user("lena")
    tenant("nlp", lead=lead, namespaces=("nlp",))
    live_client(lead)
    return lead


@pytest.fixture
def nowhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """A server that answers nothing, and a token: what the client must refuse (bad input, bad
    flags) is refused before any call."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("GPUPOOL_URL", NOWHERE)
    monkeypatch.setenv("GPUPOOL_TOKEN", "t")
