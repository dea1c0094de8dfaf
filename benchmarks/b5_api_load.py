"""B5: the API and the dashboard's pages under load on the seeded year -- p95 per endpoint
and per page, and errors.

Run it on a database loaded by ``manage.py gpupool seed-year`` (docs/benchmarks.md, B5)::

    DATABASE_URL=postgres://... python benchmarks/b5_api_load.py --json

It starts gunicorn on 127.0.0.1 (production settings: DEBUG off), gets a token for each
benchmark user (admin, finance, and a lead and a member of the largest tenant), then runs
``--users`` locust clients (20) for ``--duration`` seconds, each waiting ``--wait`` seconds (1)
between requests and playing one of those roles in turn. Each request picks an endpoint that
exists on this build of the API and that the role may read (each is tried once per role
first): the cost reports over the year and the month, the usage
intervals, tenants, memberships and flavors, and -- where the API has them -- workloads (list
and detail), queues and preemption events -- and the dashboard's pages, each logged in with a
session like a person: Overview, Queues, Cost, Preemptions and My workloads, whole and as the
live region's refresh (htmx). It prints, per endpoint, the request count, the
median, p95 and p99 in milliseconds and the errors, and whether the target holds (p95 <= 200 ms
everywhere, no errors); and gunicorn's own CPU over the measured seconds (its processes'
user and system time from ``/proc``), per request and in cores, with the load average. The
load stays on 127.0.0.1 and stops by itself.

Needs locust (``pip install -e '.[bench]'``).
"""

from __future__ import annotations

# ruff: noqa: I001 -- locust patches the standard library for gevent, so it is imported first.
import locust
from locust import HttpUser, constant, task
from locust.env import Environment

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import gevent
import requests
from b5_requests import LISTS, USERNAMES, fixed_requests

ROOT = Path(__file__).resolve().parent.parent
TARGET_P95_MS = 200.0
ROLES = ("finance", "lead", "member", "admin")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """Options of the run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=20, help="concurrent clients (20)")
    parser.add_argument("--wait", type=float, default=1.0, help="seconds between requests (1)")
    parser.add_argument("--duration", type=int, default=120, help="seconds of load (120)")
    parser.add_argument("--warmup", type=int, default=15, help="seconds before measuring (15)")
    parser.add_argument(
        "--port", type=int, default=0, help="gunicorn's port on 127.0.0.1 (default: a free one)"
    )
    parser.add_argument("--workers", type=int, default=4, help="gunicorn worker processes (4)")
    parser.add_argument("--threads", type=int, default=2, help="threads per worker (2)")
    parser.add_argument("--password", default="b5-password", help="the users' password")
    parser.add_argument("--seed", type=int, default=5, help="the clients' random seed")
    parser.add_argument(
        "--last-day",
        type=date.fromisoformat,
        default=datetime.now(UTC).date(),
        help="the seeded year's last day, YYYY-MM-DD (default: today)",
    )
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="NAME",
        help="leave out an endpoint by its name in the results, e.g. --skip queues (repeatable)",
    )
    parser.add_argument(
        "--no-pages", action="store_true", help="the API only, not the dashboard's pages"
    )
    parser.add_argument(
        "--no-api", action="store_true", help="the dashboard's pages only, not the API"
    )
    parser.add_argument(
        "--every-page",
        action="store_true",
        help="also every other page of the dashboard (fragmentation, utilisation, cluster, "
        "requests, approvals, audit), beside BENCHMARKS' overview, queues, cost and preemptions",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser.parse_args(argv)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_gunicorn(options: argparse.Namespace, log: Path) -> subprocess.Popen[bytes]:
    """gunicorn serving the project on 127.0.0.1, production settings, its own process group,
    its output in ``log``."""
    environment = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": os.environ.get("SECRET_KEY", "b5-benchmark-not-a-secret"),
        "ALLOWED_HOSTS": "127.0.0.1",
    }
    command = [
        str(Path(sys.executable).parent / "gunicorn"),
        "gpupool.wsgi:application",
        f"--bind=127.0.0.1:{options.port}",
        f"--workers={options.workers}",
        f"--threads={options.threads}",
        "--worker-class=gthread",
        # Idle keep-alive connections outlive the clients' pauses: a server closing one just
        # as a client reuses it would count as an error of the client, not of the API.
        "--keep-alive=30",
        "--log-level=warning",
    ]
    with log.open("ab") as output:
        server = subprocess.Popen(
            command,
            cwd=ROOT,
            env=environment,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{options.port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{base}/api/v1/flavors/", timeout=10).status_code == 401:
                return server
        except requests.RequestException:
            pass
        if server.poll() is not None:
            raise SystemExit(f"gunicorn exited before it answered (see {log})")
        time.sleep(0.5)
    stop(server)
    raise SystemExit(f"gunicorn did not answer within two minutes (see {log})")


def server_cpu_s(server: subprocess.Popen[bytes]) -> float:
    """CPU seconds (user and system) that gunicorn's master and its workers have used so far,
    read from ``/proc`` (Linux)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        # after the command: state, ppid, ... utime (14th field of stat) and stime (15th)
        if entry.name == str(server.pid) or fields[1] == str(server.pid):
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def stop(server: subprocess.Popen[bytes]) -> None:
    """Stop gunicorn and its workers."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


def tokens(base: str, password: str) -> dict[str, str]:
    """A token per role, for the users seed-year made."""
    found = {}
    for role, username in USERNAMES.items():
        answer = requests.post(
            f"{base}/api/v1/tokens/", json={"username": username, "password": password}, timeout=30
        )
        answer.raise_for_status()
        found[role] = answer.json()["token"]
    return found


Request = tuple[str, str]  # (name for the statistics, path)


def endpoints(
    base: str, role: str, token: str, rng: random.Random, last: date, skip: Sequence[str] = ()
) -> list[Callable[[], Request]]:
    """What the clients ask, limited to the routes this API has; ``last`` is the last day."""
    headers = {"Authorization": f"Bearer {token}"}
    index = requests.get(f"{base}/api/v1/", headers=headers, timeout=30).json()
    fixed: list[Request] = fixed_requests(last)
    for name, route in LISTS:
        if route in index:
            fixed.append((name, f"/api/v1/{route}/"))
    # A role asks only what it may read (finance reads cost, not workloads).
    fixed = [
        (name, path)
        for name, path in fixed
        if name not in skip
        and requests.get(f"{base}{path}", headers=headers, timeout=120).status_code == 200
    ]
    choices: list[Callable[[], Request]] = [lambda request=request: request for request in fixed]
    wanted = "workload detail" not in skip
    if wanted and "workloads" in index and any(name == "workloads" for name, _ in fixed):
        listed = requests.get(
            f"{base}/api/v1/workloads/?page_size=200", headers=headers, timeout=60
        ).json()
        names = [(w["namespace"], w["name"]) for w in listed.get("results", [])]
        if names:
            choices.append(
                lambda: ("workload detail", "/api/v1/workloads/{}/{}/".format(*rng.choice(names)))
            )
    return choices


# The dashboard's pages a role opens every day; each also refreshes its live region (htmx).
PAGES: dict[str, tuple[tuple[str, str], ...]] = {
    "admin": (
        ("overview", "/overview/"),
        ("queues", "/queues/"),
        ("cost", "/cost/"),
        ("preemptions", "/preemptions/"),
    ),
    "finance": (("overview", "/overview/"), ("cost", "/cost/")),
    "lead": (
        ("overview", "/overview/"),
        ("queues", "/queues/"),
        ("cost", "/cost/"),
        ("preemptions", "/preemptions/"),
        ("my workloads", "/workloads/"),
    ),
    "member": (
        ("overview", "/overview/"),
        ("queues", "/queues/"),
        ("preemptions", "/preemptions/"),
        ("my workloads", "/workloads/"),
    ),
}


# With --every-page, the product's other pages too, asked by every role that may open them
# (the others answer 403 or 404 and are left out): issue 16 holds every page to B5's target,
# BENCHMARKS' mix only the four above.
OTHER_PAGES: tuple[tuple[str, str], ...] = (
    ("fragmentation", "/fragmentation/"),
    ("utilisation", "/utilization/"),
    ("cluster", "/cluster/"),
    ("requests", "/requests/"),
    ("approvals", "/approvals/"),
    ("audit", "/audit/"),
)


def sessions(base: str, password: str) -> dict[str, str]:
    """A logged-in session (its cookie) per role, through the login page as a person would."""
    found = {}
    for role, username in USERNAMES.items():
        browser = requests.Session()
        browser.get(f"{base}/login/", timeout=30).raise_for_status()
        answer = browser.post(
            f"{base}/login/",
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": browser.cookies["csrftoken"],
            },
            headers={"Referer": f"{base}/login/"},
            timeout=30,
        )
        answer.raise_for_status()
        if "sessionid" not in browser.cookies:
            raise SystemExit(f"could not log {username} in through /login/")
        found[role] = str(browser.cookies["sessionid"])
    return found


def pages(
    base: str, role: str, session: str, every_page: bool = False
) -> list[Callable[[], PageRequest]]:
    """The pages ``role`` may open (each tried once), whole and as their live refresh."""
    opened: list[Callable[[], PageRequest]] = []
    for name, path in PAGES[role] + (OTHER_PAGES if every_page else ()):
        answer = requests.get(f"{base}{path}", cookies={"sessionid": session}, timeout=120)
        if answer.status_code != 200:
            continue
        opened.append(always((f"page {name}", path, False)))
        opened.append(always((f"page {name}, live refresh", path, True)))
    return opened


def always(request: PageRequest) -> Callable[[], PageRequest]:
    """The same request every time."""
    return lambda: request


def as_api(asked: Callable[[], Request]) -> Callable[[], PageRequest]:
    """An API request in the plan's form (not an htmx refresh)."""

    def ask() -> PageRequest:
        name, path = asked()
        return (name, path, False)

    return ask


PageRequest = tuple[str, str, bool]  # (name for the statistics, path, as htmx's refresh)


def run(options: argparse.Namespace) -> dict[str, Any]:
    """Start the server, load it, and gather the statistics."""
    options.port = options.port or free_port()
    log = Path(tempfile.gettempdir()) / f"b5-gunicorn-{options.port}.log"
    server = start_gunicorn(options, log)
    base = f"http://127.0.0.1:{options.port}"
    try:
        keys = tokens(base, options.password)
        cookies = sessions(base, options.password)
        rng = random.Random(options.seed)
        plans: dict[str, list[Callable[[], PageRequest]]] = {role: [] for role in ROLES}
        for role in ROLES:
            if not options.no_api:
                asked = endpoints(base, role, keys[role], rng, options.last_day, options.skip)
                plans[role] += [as_api(request) for request in asked]
            if not options.no_pages:
                plans[role] += pages(base, role, cookies[role], options.every_page)
        counter = iter(range(10**9))

        class Client(HttpUser):  # type: ignore[misc]
            """One person: a role, a token, a request a second."""

            host = base
            wait_time = constant(options.wait)

            def on_start(self) -> None:
                self.role = ROLES[next(counter) % len(ROLES)]
                self.client.headers["Authorization"] = f"Bearer {keys[self.role]}"
                self.client.cookies.set("sessionid", cookies[self.role])

            @task
            def ask(self) -> None:
                name, path, live = rng.choice(plans[self.role])()
                # htmx's refresh of the live region names its target, and gets only that part
                headers = {"HX-Request": "true", "HX-Target": "live"} if live else {}
                with self.client.get(
                    path, name=name, headers=headers, catch_response=True
                ) as answer:
                    if answer.status_code != 200:
                        answer.failure(f"{answer.status_code}")

        environment = Environment(user_classes=[Client])
        runner = environment.create_local_runner()
        runner.start(options.users, spawn_rate=options.users)
        gevent.sleep(options.warmup)
        environment.stats.reset_all()
        cpu_before, load_before = server_cpu_s(server), os.getloadavg()
        gevent.sleep(options.duration)
        cpu = server_cpu_s(server) - cpu_before
        load_after = os.getloadavg()
        runner.quit()
        result = report(environment, options)
        requests_seen = max(result["requests"], 1)
        result["server_cpu_s"] = round(cpu, 1)
        result["server_cpu_ms_per_request"] = round(1000 * cpu / requests_seen, 1)
        result["server_cores_used"] = round(cpu / options.duration, 2)
        result["load_average"] = {"before": load_before, "after": load_after}
        return result
    finally:
        stop(server)


def report(environment: Environment, options: argparse.Namespace) -> dict[str, Any]:
    """Per endpoint: requests, median, p95, p99 (ms) and errors; and the verdict."""
    rows = {}
    for (name, _method), entry in sorted(environment.stats.entries.items()):
        rows[name] = {
            "requests": entry.num_requests,
            "errors": entry.num_failures,
            "median_ms": entry.get_response_time_percentile(0.5),
            "p95_ms": entry.get_response_time_percentile(0.95),
            "p99_ms": entry.get_response_time_percentile(0.99),
            "max_ms": round(entry.max_response_time or 0, 1),
        }
    total = environment.stats.total
    worst = max((row["p95_ms"] or 0 for row in rows.values()), default=0)
    return {
        "users": options.users,
        "wait_s": options.wait,
        "duration_s": options.duration,
        "skipped": list(options.skip),
        "gunicorn": {"workers": options.workers, "threads": options.threads},
        "requests": total.num_requests,
        "requests_per_s": round(total.num_requests / options.duration, 1),
        "errors": total.num_failures,
        "p95_ms": total.get_response_time_percentile(0.95),
        "worst_endpoint_p95_ms": worst,
        "target_met": worst <= TARGET_P95_MS and total.num_failures == 0,
        "endpoints": rows,
        "error_kinds": {
            f"{error.name}: {error.error}": error.occurrences
            for error in environment.stats.errors.values()
        },
        "locust": locust.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    """Run B5 and print the figures; exit 1 when the target is missed."""
    options = parse_arguments(argv)
    result = run(options)
    if options.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{'endpoint':44} {'requests':>8} {'median':>7} {'p95':>7} {'p99':>7} errors")
        for name, row in result["endpoints"].items():
            print(
                f"{name:44} {row['requests']:8d} {row['median_ms']:7.0f} {row['p95_ms']:7.0f} "
                f"{row['p99_ms']:7.0f} {row['errors']}"
            )
        print(
            f"gunicorn used {result['server_cpu_s']} s of CPU: "
            f"{result['server_cpu_ms_per_request']} ms a request, "
            f"{result['server_cores_used']} cores; load average {result['load_average']}"
        )
        print(
            f"{result['requests']} requests ({result['requests_per_s']}/s), "
            f"{result['errors']} errors, worst p95 {result['worst_endpoint_p95_ms']} ms: "
            f"target {'met' if result['target_met'] else 'MISSED'}"
        )
    return 0 if result["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
