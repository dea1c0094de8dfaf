"""``/healthz``: is the database reachable, is the broker, do cycles run, and the last one."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from gpupool.control.choices import CycleStatus
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
    import redis  # here: importing it cost every process start up to 0.15 s, for one probe

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


def stale_after_s() -> float:
    """How long without a new cycle before the loop counts as stopped: a cycle may run up to
    its time limit, and one starts at least every interval (skipped ones aside)."""
    return settings.GPUPOOL_CYCLE_TIME_LIMIT_S + 3 * settings.GPUPOOL_CYCLE_INTERVAL_S


def scheduler_status() -> dict[str, Any]:
    """Whether cycles run: the newest one that was not skipped started within
    ``stale_after_s``. Skipped ones do not count: they say a cycle holds the lock, not that it
    ends. A stopped loop is also what an upgrade leaves when no worker takes the loop's
    Celery queue (``GPUPOOL_CYCLE_QUEUE``), so the error says that too."""
    limit = stale_after_s()
    newest = (
        SchedulingCycle.objects.exclude(status=CycleStatus.SKIPPED)
        .order_by("-started_at", "-id")
        .values_list("started_at", flat=True)
        .first()
    )
    if newest is None:
        return {"ok": True, "age_s": None, "stale_after_s": limit}
    age = round((timezone.now() - newest).total_seconds(), 1)
    if age <= limit:
        return {"ok": True, "age_s": age, "stale_after_s": limit}
    return {
        "ok": False,
        "age_s": age,
        "stale_after_s": limit,
        "error": f"no scheduling cycle has started for {age:.0f} s: is `gpupool loop` running, "
        f"or a Celery worker taking the queue '{settings.GPUPOOL_CYCLE_QUEUE}', and beat?",
    }


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """ok (200); degraded (200): the broker is down or no cycle runs; down: the database is
    unreachable (503). Degraded stays 200: restarting the web server would not help."""
    database = database_status()
    broker = broker_status()
    last_cycle = scheduler = None
    if database["ok"]:
        try:
            last_cycle = last_cycle_summary()
            scheduler = scheduler_status()
        except DatabaseError as error:  # reachable but not migrated, or lost meanwhile
            database = {**database, "ok": False, "error": str(error).strip()[:300]}
    if not database["ok"]:
        status, code = "down", 503
    elif not broker["ok"] or (scheduler is not None and not scheduler["ok"]):
        status, code = "degraded", 200
    else:
        status, code = "ok", 200
    body = {
        "status": status,
        "database": database,
        "broker": broker,
        "scheduler": scheduler,
        "last_cycle": last_cycle,
    }
    return JsonResponse(body, status=code)
