"""``gpupool status`` lists a user's workloads newest first, as the My workloads page does;
it listed them oldest first (``?ordering=submitted_at``), so the two disagreed on the same
work. A list cut at the most the client reads keeps the newest, as the page's first page
does."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from client_cli import run
from django.test import Client
from django.utils import timezone
from domain_builders import flavor, node, priority_class, queue, quota, tenant, user

from gpupool.api.actions import do_issue_token
from gpupool.client import http
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

pytestmark = pytest.mark.django_db(transaction=True)

# Submitted in this order, a minute apart: "first" is the oldest.
SUBMITTED = ("first", "second", "third", "fourth")


@pytest.fixture
def lena(live_server: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Lena's queue holds four pending workloads, submitted a minute apart, named so that
    neither their names nor their ids would give the newest first by chance."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    priority_class("normal", default=True)
    lena = user("lena")
    nlp = tenant("nlp", lead=lena, namespaces=("nlp",))
    train = queue("nlp-train", parent=queue("root"), tenant=nlp)
    quota(train, h100, 0, 8, 8)
    start = timezone.now() - timedelta(hours=1)
    for minutes, name in enumerate(SUBMITTED):
        do_submit_workload(
            name,
            queue=train,
            pod_sets=[PodSetSpec(count=1, gpus=1, flavor=h100)],
            at=start + timedelta(minutes=minutes),
        )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("GPUPOOL_URL", live_server.url)
    monkeypatch.setenv("GPUPOOL_TOKEN", do_issue_token(lena).key)
    return lena


def listed(out: str) -> list[str]:
    """The workloads of ``gpupool status``'s table, in its order."""
    return [line.split()[0].removeprefix("nlp/") for line in out.splitlines() if line[:4] == "nlp/"]


def test_status_lists_newest_first_as_the_my_workloads_page(lena: Any) -> None:
    status, out, err = run("status")
    assert status == 0, err
    assert listed(out) == list(reversed(SUBMITTED))
    # the page's order, read from the page itself
    page = Client()
    page.force_login(lena)
    html = page.get("/workloads/").content.decode()
    on_page = re.findall(r'href="/workloads/nlp/([a-z]+)/"', html)
    assert list(dict.fromkeys(on_page)) == listed(out)


def test_status_json_is_newest_first_too(lena: Any) -> None:
    status, out, err = run("status", "--json")
    assert status == 0, err
    assert [row["name"] for row in json.loads(out)] == list(reversed(SUBMITTED))


def test_a_list_cut_at_the_most_the_client_reads_shows_the_newest(
    lena: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http, "MAX_ROWS", 2)
    monkeypatch.setattr(http, "PAGE_SIZE", 1)
    status, out, err = run("status")
    assert status == 0
    assert listed(out) == ["fourth", "third"]
    assert "showing the first 2 of 4 workloads" in err
