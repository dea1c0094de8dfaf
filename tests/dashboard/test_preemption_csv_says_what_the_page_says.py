"""The Preemptions page's CSV link says what it downloads, and the download writes a list or
an object as the JSON answer has it.

The API lists a tenant the preemptions of its own work (the victim's tenant); the page lists
those and the ones its work caused. The link to the CSV says it holds the preemptions the
viewer's teams' work suffered, and it does. A cell that is a list or an object (``nodes``,
``drains``) is its JSON text, not Python's (``['n1']``), as the audit CSV writes before and
after (``gpupool.api.tables.csv_cell``)."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

from dashboard_pages import text
from django.utils import timezone
from two_teams import submit

from gpupool.accounting.actions import do_record_preemption
from gpupool.inventory.actions import do_drain_node
from gpupool.inventory.models import Node


def download(client: Any, url: str) -> list[dict[str, str]]:
    answer = client.get(url)
    assert answer.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))


def preempt(victim: Any, preemptor: Any, minutes_ago: int) -> None:
    do_record_preemption(
        victim,
        reason="reclaim",
        at=timezone.now() - timedelta(minutes=minutes_ago),
        gpus_freed=8,
        lost_gpu_hours=Decimal(1),
        preemptor=preemptor,
    )


def test_the_csv_link_says_it_holds_what_the_teams_work_suffered_and_it_does(
    pool: Any, page_as: Any
) -> None:
    nlp_run = submit(pool, "big-run", pool.nlp_queue, "max")
    vision_run = submit(pool, "sweep", pool.vision_queue, "vic")
    preempt(submit(pool, "small", pool.nlp_queue, "max"), vision_run, 1)  # nlp's work suffered
    preempt(nlp_run, vision_run, 2)  # suffered
    preempt(submit(pool, "other", pool.vision_queue, "vic"), nlp_run, 3)  # nlp's work caused
    preempt(submit(pool, "third", pool.vision_queue, "vic"), nlp_run, 4)  # caused
    client = page_as("lena")
    page = text(client.get("/preemptions/"))
    sides = re.findall(r'<td data-side="(\w+)">', page)
    assert sorted(sides) == ["caused", "caused", "suffered", "suffered"]
    link = re.search(r'<a id="csv-preemptions" href="([^"]+)" download>([^<]+)</a>', page)
    assert link is not None
    href, words = link.group(1).replace("&amp;", "&"), link.group(2)
    assert words == "Every preemption your teams' work suffered as CSV"
    # What the teams' work caused has a CSV of its own now (the API's ``side=caused``).
    assert re.search(r'<a id="csv-preemptions-caused" href="[^"]+" download>', page)
    rows = download(client, href)
    assert sorted(row["victim"] for row in rows) == ["nlp/big-run", "nlp/small"]
    assert len(rows) == sides.count("suffered") + sides.count("both")
    # An admin's page lists every preemption, and so does its CSV.
    admin_page = text(page_as("ada").get("/preemptions/"))
    assert ">Every preemption as CSV</a>" in admin_page
    assert len(download(page_as("ada"), href)) == 4


def test_the_csv_writes_a_preemptions_nodes_and_drains_as_json(pool: Any, page_as: Any) -> None:
    do_drain_node(Node.objects.get(name="n1"), acting_user=pool.users["ada"], reason="swap PSU")
    do_record_preemption(
        submit(pool, "train", pool.nlp_queue, "max"),
        reason="admin",
        at=timezone.now(),
        gpus_freed=8,
        lost_gpu_hours=Decimal(1),
        nodes=["n1"],
    )
    client = page_as("lena")
    [event] = client.get("/api/v1/preemptions/").json()["results"]
    assert event["nodes"] == ["n1"] and [d["node"] for d in event["drains"]] == ["n1"]
    [row] = download(client, "/api/v1/preemptions/?format=csv")
    assert row["nodes"] == '["n1"]'
    assert json.loads(row["drains"]) == event["drains"]
    assert row["drains"].startswith('[{"node": "n1", ')
