"""``/healthz``: is the database reachable, is the broker, and when did the last cycle run."""

from __future__ import annotations

import time
from typing import Any

import redis
from django.conf import settings
from django.db import DatabaseError, connections
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from gpupool.control.models import SchedulingCycle

BROKER_TIMEOUT_S = 1.0


def database_status(alias: str = "default") -> dict[str, Any]:
    """Run ``SELECT 1`` on the database; report its vendor, latency, or the error."""
    connection = connections[alias]
    started = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as error:
        return {"ok": False, "vendor": connection.vendor, "error": str(error).strip()[:300]}
    latency_ms = round((time.perf_counter() - started) * 1000, 2)
    return {"ok": True, "vendor": connection.vendor, "latency_ms": latency_ms}


def broker_status() -> dict[str, Any]:
    """Ping Redis when ``REDIS_URL`` is set; without it the loop runs in-process."""
    url = settings.REDIS_URL
    if not url:
        return {"ok": True, "kind": "none (in-process)"}
    client = redis.Redis.from_url(
        url, socket_connect_timeout=BROKER_TIMEOUT_S, socket_timeout=BROKER_TIMEOUT_S
    )
    try:
        client.ping()
    except redis.RedisError as error:
        return {"ok": False, "kind": "redis", "error": str(error)[:300]}
    finally:
        client.close()
    return {"ok": True, "kind": "redis"}


def last_cycle_summary() -> dict[str, Any] | None:
    """The newest scheduling cycle as JSON data, or None before the first one."""
    cycle = SchedulingCycle.objects.order_by("-started_at", "-id").first()
    if cycle is None:
        return None
    return {
        "id": cycle.pk,
        "started_at": cycle.started_at.isoformat(),
        "finished_at": cycle.finished_at.isoformat() if cycle.finished_at else None,
        "status": cycle.status,
        "duration_s": cycle.duration_s(),
        "admitted": cycle.admitted,
        "evicted": cycle.evicted,
        "pending": cycle.pending,
        "error": cycle.error,
    }


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """ok (200), degraded: broker down (200), or down: database unreachable (503)."""
    database = database_status()
    broker = broker_status()
    last_cycle = None
    if database["ok"]:
        try:
            last_cycle = last_cycle_summary()
        except DatabaseError as error:  # reachable but not migrated, or lost meanwhile
            database = {**database, "ok": False, "error": str(error).strip()[:300]}
    if not database["ok"]:
        status, code = "down", 503
    elif not broker["ok"]:
        status, code = "degraded", 200
    else:
        status, code = "ok", 200
    body = {"status": status, "database": database, "broker": broker, "last_cycle": last_cycle}
    return JsonResponse(body, status=code)
