"""/healthz reports the database, the broker, whether cycles run and the last one; 503 when the
database is down."""

import os
import socket
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connections
from django.test import Client
from django.utils import timezone

from gpupool.control import views
from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.control.models import SchedulingCycle

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
    assert body["scheduler"]["ok"] is True and body["scheduler"]["age_s"] is None


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


@pytest.mark.django_db
def test_a_loop_that_stopped_degrades_and_says_what_to_check(client: Client, settings: Any) -> None:
    """No cycle for longer than a cycle's time limit and three intervals: degraded (200),
    naming the loop's Celery queue; a skipped cycle (the lock held) does not count as one."""
    settings.REDIS_URL = ""
    settings.GPUPOOL_CYCLE_INTERVAL_S, settings.GPUPOOL_CYCLE_TIME_LIMIT_S = 5.0, 120.0
    now = timezone.now()
    ran = do_start_cycle(at=now - timedelta(seconds=100))
    do_finish_cycle(ran, at=now - timedelta(seconds=99), status="succeeded")
    body = client.get("/healthz").json()
    assert body["status"] == "ok" and body["scheduler"]["ok"] is True
    assert 100 <= body["scheduler"]["age_s"] < 135 == body["scheduler"]["stale_after_s"]
    SchedulingCycle.objects.filter(pk=ran.pk).update(started_at=now - timedelta(seconds=140))
    skipped = do_start_cycle(at=now - timedelta(seconds=1))
    do_finish_cycle(skipped, at=now, status="skipped")
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded" and body["scheduler"]["ok"] is False
    assert "queue 'cycle'" in body["scheduler"]["error"]
    assert body["last_cycle"]["status"] == "skipped"  # the newest row is still reported
