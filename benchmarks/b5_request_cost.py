"""B5, one request at a time: each page's and endpoint's own cost on the seeded year.

    DATABASE_URL=postgres://.../gpupool_b5 \\
        python benchmarks/b5_request_cost.py --last-day 2026-11-30 --json

On a shared machine the load run's wall-clock p95 (``b5_api_load.py``) measures the other
work as much as ours. This measures what a request itself costs, in process with Django's
test client (``DEBUG`` off, so queries are counted with ``CaptureQueriesContext``): for each
role of ``b5_api_load.py`` and each page (whole and as its live refresh) and API endpoint it
asks, ``--repeat`` requests after one warm-up, and reports the median process CPU seconds
(``time.process_time``: this process only, the database's work not included), wall seconds,
the time the database took (wall clock around each query) and the number of queries. The CPU
per request times 20 requests a second is what the web workers need of the machine's cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")
os.environ.setdefault("SECRET_KEY", "b5-benchmark-not-a-secret")
os.environ.setdefault("DEBUG", "0")

from b5_requests import LISTS, USERNAMES, fixed_requests  # noqa: E402  (beside this script)


def api_paths(last: date) -> list[tuple[str, str]]:
    """The API requests of ``b5_api_load.py`` (its names), for the year ending ``last``."""
    return [(name, f"/api/v1/{route}/") for name, route in LISTS] + fixed_requests(last)


PAGES = [
    ("overview", "/overview/"),
    ("queues", "/queues/"),
    ("cost", "/cost/"),
    ("preemptions", "/preemptions/"),
    ("my workloads", "/workloads/"),
    ("fragmentation", "/fragmentation/"),
]


def measure(client: Any, path: str, headers: dict[str, str], repeat: int) -> dict[str, Any] | None:
    """Median CPU, wall and database seconds and the query count of ``repeat`` requests
    after a warm-up one; None when the role may not ask it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    first = client.get(path, headers=headers)
    if first.status_code != 200:
        return None
    cpus, walls, databases, counts = [], [], [], []
    spent: list[float] = []

    def timed_query(execute: Any, sql: Any, params: Any, many: Any, context: Any) -> Any:
        began = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            spent.append(time.perf_counter() - began)

    for _ in range(repeat):
        spent.clear()
        with CaptureQueriesContext(connection), connection.execute_wrapper(timed_query):
            wall, cpu = time.perf_counter(), time.process_time()
            answer = client.get(path, headers=headers)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert answer.status_code == 200, (path, answer.status_code)
        cpus.append(cpu)
        walls.append(wall)
        databases.append(sum(spent))
        counts.append(len(spent))
    return {
        "cpu_ms": round(statistics.median(cpus) * 1000),
        "wall_ms": round(statistics.median(walls) * 1000),
        "db_ms": round(statistics.median(databases) * 1000),
        "queries": max(counts),
        "bytes": len(first.content),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--last-day",
        type=date.fromisoformat,
        default=datetime.now(UTC).date(),
        help="the seeded year's last day, YYYY-MM-DD (default: today)",
    )
    parser.add_argument("--repeat", type=int, default=5, help="requests measured per row (5)")
    parser.add_argument("--roles", default="admin,finance,lead,member")
    parser.add_argument("--only", default="", help="names to measure, comma-separated")
    parser.add_argument("--no-api", action="store_true", help="the pages only")
    parser.add_argument("--no-pages", action="store_true", help="the API only")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    settings.ALLOWED_HOSTS = ["*"]
    wanted = {name.strip() for name in options.only.split(",") if name.strip()}
    asked: list[tuple[str, str, dict[str, str]]] = []
    if not options.no_pages:
        for name, path in PAGES:
            asked.append((f"page {name}", path, {}))
            asked.append(
                (f"page {name}, live refresh", path, {"HX-Request": "true", "HX-Target": "live"})
            )
    if not options.no_api:
        asked += [(name, path, {}) for name, path in api_paths(options.last_day)]
    users = get_user_model().objects
    result: dict[str, Any] = {"repeat": options.repeat, "load_average": os.getloadavg(), "rows": {}}
    for role in options.roles.split(","):
        client = Client()
        client.force_login(users.get(username=USERNAMES[role]))
        for name, path, headers in asked:
            if wanted and name not in wanted and name.removesuffix(", live refresh") not in wanted:
                continue
            row = measure(client, path, headers, options.repeat)
            if row is not None:
                result["rows"].setdefault(name, {})[role] = row
                if not options.json:
                    print(f"{name:44} {role:8} {json.dumps(row)}", flush=True)
    result["load_average_after"] = os.getloadavg()
    if options.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
