"""/healthz reports the database, the broker and the last cycle; 503 when the database is down."""

import os
import socket
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connections
from django.test import Client

from gpupool.control import views
from gpupool.control.actions import do_finish_cycle, do_start_cycle

T0 = datetime.fromisoformat("2026-11-29T10:00:00+00:00")


def closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.django_db
def test_healthy_without_broker_and_before_any_cycle(client: Client, settings: Any) -> None:
    settings.REDIS_URL = ""
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"]["ok"] is True
    assert body["database"]["vendor"] == connections["default"].vendor
    assert body["broker"] == {"ok": True, "kind": "none (in-process)"}
    assert body["last_cycle"] is None


@pytest.mark.django_db
def test_the_last_cycle_is_reported(client: Client, settings: Any) -> None:
    settings.REDIS_URL = ""
    old = do_start_cycle(at=T0)
    do_finish_cycle(old, at=T0 + timedelta(seconds=1), status="succeeded")
    new = do_start_cycle(at=T0 + timedelta(seconds=5))
    do_finish_cycle(new, at=T0 + timedelta(seconds=5.5), status="succeeded", admitted=3, pending=2)
    last = client.get("/healthz").json()["last_cycle"]
    assert last["id"] == new.pk
    assert last["duration_s"] == 0.5
    assert (last["admitted"], last["pending"], last["status"]) == (3, 2, "succeeded")


@pytest.mark.django_db
def test_an_unreachable_broker_degrades_but_stays_200(client: Client, settings: Any) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port()}/0"
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert body["broker"]["ok"] is False and body["broker"]["error"]


@pytest.mark.django_db
def test_a_reachable_broker_is_ok(client: Client, settings: Any) -> None:
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.skip("REDIS_URL is not set: the embedded run has no broker to ping")
    settings.REDIS_URL = url
    assert client.get("/healthz").json()["broker"] == {"ok": True, "kind": "redis"}


@pytest.mark.django_db
def test_an_unreachable_database_answers_503(
    client: Client, settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # given a database connection that really cannot connect: PostgreSQL on a closed port,
    # or SQLite in a folder that does not exist
    broken = connections.create_connection("default")
    broken.settings_dict = dict(broken.settings_dict)
    if broken.vendor == "postgresql":
        broken.settings_dict.update(HOST="127.0.0.1", PORT=str(closed_port()))
        broken.settings_dict.setdefault("OPTIONS", {})
        broken.settings_dict["OPTIONS"] = {**broken.settings_dict["OPTIONS"], "connect_timeout": 2}
    else:
        broken.settings_dict["NAME"] = str(tmp_path / "missing" / "db.sqlite3")
    monkeypatch.setattr(views, "connections", {"default": broken})
    settings.REDIS_URL = ""
    try:
        # when /healthz is asked
        response = client.get("/healthz")
    finally:
        broken.close()
    # then it says the database is down, why, and answers 503
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "down"
    assert body["database"]["ok"] is False
    assert body["database"]["error"]
    assert body["last_cycle"] is None
