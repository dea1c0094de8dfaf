"""A team lists and downloads the preemptions its own work caused: ``?side=caused`` on the
preemptions API (and its CSV, linked from the Preemptions page), the default side staying the
victim's tenant.

Of a victim of another team it sees what a victim's team sees of the preemptor: the queue and
the tenant, never the workload's name, its nodes, nor a namespace filter that would name it.
A victim of its own team (work that stopped its own) it sees whole."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

from dashboard_pages import text
from django.utils import timezone
from two_teams import submit

from gpupool.accounting.actions import do_record_preemption

URL = "/api/v1/preemptions/"


def preempt(victim: Any, preemptor: Any, minutes_ago: int, nodes: tuple[str, ...] = ()) -> Any:
    return do_record_preemption(
        victim,
        reason="preempt",
        at=timezone.now() - timedelta(minutes=minutes_ago),
        gpus_freed=8,
        lost_gpu_hours=Decimal(2),
        preemptor=preemptor,
        nodes=list(nodes),
    )


def download(client: Any, url: str) -> tuple[str, list[dict[str, str]]]:
    answer = client.get(url)
    assert answer.status_code == 200
    body = b"".join(answer.streaming_content).decode()
    return answer["Content-Disposition"], list(csv.DictReader(io.StringIO(body)))


def sides(pool: Any) -> dict[str, Any]:
    """nlp's run stopped two of vision's and one of its own; vision's stopped one of nlp's."""
    nlp_run = submit(pool, "big-run", pool.nlp_queue, "max")
    vision_run = submit(pool, "sweep", pool.vision_queue, "vic")
    return {
        "caused_vision": preempt(submit(pool, "v1", pool.vision_queue, "vic"), nlp_run, 1, ("n1",)),
        "caused_vision_2": preempt(submit(pool, "v2", pool.vision_queue, "vic"), nlp_run, 2),
        "caused_own": preempt(submit(pool, "mine", pool.nlp_queue, "max"), nlp_run, 3, ("n2",)),
        "suffered": preempt(submit(pool, "small", pool.nlp_queue, "max"), vision_run, 4),
    }


def test_a_team_lists_the_preemptions_its_work_caused(pool: Any, page_as: Any) -> None:
    events = sides(pool)
    client = page_as("max")
    caused = client.get(URL, {"side": "caused"}).json()["results"]
    assert [row["id"] for row in caused] == [
        events["caused_vision"].pk,
        events["caused_vision_2"].pk,
        events["caused_own"].pk,
    ]
    assert {row["preemptor"] for row in caused} == {"nlp/big-run"}
    # The default side is still the victim's tenant: what nlp's work suffered.
    suffered = client.get(URL).json()["results"]
    assert sorted(row["victim"] for row in suffered) == ["nlp/mine", "nlp/small"]
    assert client.get(URL, {"side": "suffered"}).json()["results"] == suffered
    # Vision lists as caused the one its work caused, and none of nlp's.
    [theirs] = page_as("vic").get(URL, {"side": "caused"}).json()["results"]
    assert theirs["id"] == events["suffered"].pk
    # An admin lists every event a team's work caused.
    assert len(page_as("ada").get(URL, {"side": "caused"}).json()["results"]) == 4


def test_another_teams_victim_shows_as_a_victim_sees_its_preemptor(pool: Any, page_as: Any) -> None:
    events = sides(pool)
    client = page_as("max")
    by_id = {row["id"]: row for row in client.get(URL, {"side": "caused"}).json()["results"]}
    theirs = by_id[events["caused_vision"].pk]
    assert theirs["victim"] is None and theirs["nodes"] == [] and theirs["drains"] == []
    assert (theirs["victim_queue"], theirs["victim_tenant"]) == ("vision", "vision")
    assert (theirs["gpus_freed"], theirs["lost_gpu_hours"]) == ("8.000", "2.0000")
    # The mirror: how vision, the victim's team, sees nlp's preemptor of it.
    [mirror] = [
        row
        for row in page_as("vic").get(URL).json()["results"]
        if row["id"] == events["caused_vision"].pk
    ]
    assert mirror["preemptor"] is None and mirror["preemptor_owner"] is None
    assert (mirror["preemptor_queue"], mirror["preemptor_tenant"]) == ("nlp", "nlp")
    assert mirror["victim"] == "vision/v1" and mirror["nodes"] == ["n1"]
    # Its own team's victim it sees whole, on either side.
    own = by_id[events["caused_own"].pk]
    assert (own["victim"], own["nodes"]) == ("nlp/mine", ["n2"])


def test_a_namespace_filter_never_names_another_teams_victim(pool: Any, page_as: Any) -> None:
    events = sides(pool)
    client = page_as("max")
    assert client.get(URL, {"side": "caused", "namespace": "vision"}).json()["results"] == []
    [own] = client.get(URL, {"side": "caused", "namespace": "nlp"}).json()["results"]
    assert own["id"] == events["caused_own"].pk
    # An admin's filter finds every victim in it.
    found = page_as("ada").get(URL, {"side": "caused", "namespace": "vision"}).json()["results"]
    assert len(found) == 2


def test_a_side_that_is_none_is_refused_naming_the_sides(pool: Any, page_as: Any) -> None:
    sides(pool)
    answer = page_as("max").get(URL, {"side": "mine"})
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {
        "side": ["'mine' is not a side: one of suffered, caused"]
    }


def test_the_page_links_the_csv_of_what_the_teams_work_caused(pool: Any, page_as: Any) -> None:
    sides(pool)
    client = page_as("max")
    page = text(client.get("/preemptions/"))
    link = re.search(r'<a id="csv-preemptions-caused" href="([^"]+)" download>([^<]+)</a>', page)
    assert link is not None
    assert link.group(2) == "every preemption your teams' work caused as CSV"
    assert "on this page only" not in page
    name, rows = download(client, link.group(1).replace("&amp;", "&"))
    assert name == 'attachment; filename="preemptions-caused.csv"'
    # The CSV holds the rows the page's table marks as caused (or both), named as there.
    marked = re.findall(r'<td data-side="(\w+)">', page)
    assert len(rows) == marked.count("caused") + marked.count("both") == 3
    assert sorted(row["victim"] for row in rows) == ["", "", "nlp/mine"]
    assert "vision/v1" not in page and "vision/v1" not in str(rows)
    assert {row["victim_tenant"] for row in rows} == {"vision", "nlp"}
    # An admin's page lists every preemption; its one link downloads them all.
    assert 'id="csv-preemptions-caused"' not in text(page_as("ada").get("/preemptions/"))
