"""One set of windows and one default (``utilization.windows``) for the Utilisation page, the
API's ``?window=`` and ``manage.py gpupool utilization``. Before, the API and the command
line defaulted to the last hour while the page showed 24 hours, and the command line
refused ``--since 7d`` (days) and had no ``--window``."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from domain_builders import flavor, priority_class, queue, tenant, user
from rest_framework.test import APIClient

from gpupool.accounting.actions import do_open_usage
from gpupool.control.clock import pool_clock
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db

TEAMS = "/api/v1/utilization/tenants/"
HOURS = {"6h": 6, "24h": 24, "7d": 7 * 24}  # the windows, by name: how many hours back


@pytest.fixture
def admin() -> User:
    """Team a has held 4 GPUs for the last 30 hours, to the pool's clock; an admin."""
    now = pool_clock()
    h100 = flavor("h100")
    priority_class("normal", default=True)
    on = queue("team-a", parent=queue("root"), tenant=tenant("a", namespaces=("team-a",)))
    job = do_submit_workload(
        "job", queue=on, pod_sets=[PodSetSpec(1, gpus=4, flavor=h100)], at=now - timedelta(days=2)
    )
    do_open_usage(job, flavor=h100, gpus=4, at=now - timedelta(hours=30))
    ada: User = user("ada", admin=True)
    return ada


def api(admin: User, query: str = "") -> float:
    """Team a's allocated GPU-hours on the API."""
    client = APIClient()
    client.force_authenticate(admin)
    answer = client.get(TEAMS + query)
    assert answer.status_code == 200, answer.content
    (row,) = answer.json()
    return float(row["allocated_gpu_hours"])


def page(admin: User, query: str = "") -> str:
    """The Utilisation page as the admin sees it."""
    client = Client()
    client.force_login(admin)
    return client.get("/utilization/" + query).content.decode()


def command(*arguments: str) -> dict[str, Any]:
    """``manage.py gpupool utilization --json`` with ``arguments``."""
    out = StringIO()
    call_command("gpupool", "utilization", "--json", *arguments, stdout=out)
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


def reach_hours(document: dict[str, Any]) -> float:
    """How many hours the command's window reaches back."""
    since, until = (datetime.fromisoformat(document[name]) for name in ("since", "until"))
    return (until - since).total_seconds() / 3600


def test_the_page_the_api_and_the_command_line_default_to_the_same_window(admin: User) -> None:
    on_the_api, on_the_command_line, html = api(admin), command(), page(admin)

    # The day before the pool's clock: 24 of the 30 hours held, at 4 GPUs.
    assert on_the_api == pytest.approx(96.0, abs=0.05)
    assert reach_hours(on_the_command_line) == pytest.approx(24.0)
    (row,) = on_the_command_line["tenants"]
    assert row["allocated_gpu_hours"] == pytest.approx(on_the_api, abs=0.05)
    assert '<option value="24h" selected>' in html
    assert re.search(r'data-column="allocated_gpu_hours">96(\.0+)?\sGPU-h<', html)


def test_every_window_the_page_offers_is_taken_by_the_api_and_the_command_line(
    admin: User,
) -> None:
    offered = re.findall(r'<option value="([^"]+)"', page(admin))

    assert offered == list(HOURS)
    for name in offered:
        held_hours = min(HOURS[name], 30)  # held for 30 hours
        assert api(admin, f"?window={name}") == pytest.approx(4 * held_hours, abs=0.05)
        (row,) = command("--window", name)["tenants"]
        assert row["allocated_gpu_hours"] == pytest.approx(4 * held_hours, abs=0.05)
        assert f'<option value="{name}" selected>' in page(admin, f"?window={name}")


def test_the_command_line_takes_days_in_since_as_the_api_takes_7d(admin: User) -> None:
    document = command("--since", "7d")

    assert reach_hours(document) == pytest.approx(7 * 24)
    (row,) = document["tenants"]
    assert row["allocated_gpu_hours"] == pytest.approx(api(admin, "?window=7d"), abs=0.05)
    assert reach_hours(command("--since", "90m")) == pytest.approx(1.5)  # as before


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--window", "5h"), "argument --window: '5h' is not a window: one of 6h, 24h, 7d"),
        (("--window", "1w"), "argument --window: '1w' is not a window: one of 6h, 24h, 7d"),
        (("--since", "100d"), 'argument --since: "100d" is longer than a window may be (92 days)'),
        (("--since", "7days"), 'argument --since: "7days" is not a duration'),
        (
            ("--window", "6h", "--since", "2h"),
            "argument --since: not allowed with argument --window",
        ),
    ],
)
def test_a_bad_window_on_the_command_line_names_the_option(
    arguments: tuple[str, ...], message: str
) -> None:
    out = StringIO()
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("gpupool", "utilization", *arguments, stdout=out)
    assert out.getvalue() == ""
