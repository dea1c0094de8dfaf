"""The Audit page links the audit API's CSV of every change its filters keep: the page's
filters carried over (its days, in the viewer's zone with Until included, as the API's
moments), a filter the page did not understand left out as the page leaves it out, and the
download an admin's only, as the page is."""

from __future__ import annotations

import csv
import io
import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from dashboard_pages import rows, text

from gpupool.audit.actions import record_audit_event
from gpupool.audit.models import AuditEvent
from gpupool.inventory.actions import do_set_node_cordoned
from gpupool.inventory.models import Node


def csv_link(page: str) -> str:
    """Where the page's "as CSV" link points."""
    link = re.search(r'<a id="csv-audit" href="([^"]+)" download>', page)
    assert link is not None, page
    return link.group(1).replace("&amp;", "&")


def download(client: Any, url: str) -> list[dict[str, str]]:
    answer = client.get(url)
    assert answer.status_code == 200, answer.content
    return list(csv.DictReader(io.StringIO(b"".join(answer.streaming_content).decode())))


def shown_actions(page: str) -> list[str]:
    """The actions of the page's rows, top to bottom (their stored names)."""
    return re.findall(r'<td title="([^"]+)">', rows(page))


def test_the_link_downloads_the_changes_the_page_shows_with_its_filters(
    pool: Any, page_as: Any
) -> None:
    for name in ("n1", "n2"):
        do_set_node_cordoned(
            Node.objects.get(name=name), cordoned=True, acting_user=pool.users["ada"], reason="rma"
        )
    client = page_as("ada")
    page = text(client.get("/audit/?made_by=people&action=inventory.set_node_cordoned"))
    assert "2 changes match" in page
    got = download(client, csv_link(page))
    assert [row["action"] for row in got] == shown_actions(page)
    assert [row["object"] for row in got] == ["n2", "n1"]  # newest first, as the page
    assert {row["actor"] for row in got} == {"ada"}
    # Unfiltered, the link holds every change (the page lists the first 50 of them).
    everything = text(client.get("/audit/"))
    assert len(download(client, csv_link(everything))) == AuditEvent.objects.count()


def test_the_links_days_are_the_viewers_days_with_until_included(pool: Any, page_as: Any) -> None:
    # 23:30 on 1 March in Tokyo is 14:30 UTC that day; 00:30 on 2 March in Tokyo is still
    # 1 March in UTC, and 23:30 on 2 March in Tokyo is inside Until 2026-03-02.
    tokyo = ZoneInfo("Asia/Tokyo")
    for day, hour, what in ((1, 23, "late-first"), (2, 0, "early-second"), (2, 23, "late-second")):
        event = record_audit_event(
            acting_user=None,
            action=f"test.{what}",
            instance=pool.nlp,
            before=None,
            after={"name": "nlp"},
        )
        AuditEvent.objects.filter(pk=event.pk).update(
            at=datetime(2026, 3, day, hour, 30, tzinfo=tokyo)
        )
    client = page_as("ada")
    client.cookies["gpupool_tz"] = "Asia/Tokyo"
    page = text(client.get("/audit/?since=2026-03-02&until=2026-03-02"))
    assert shown_actions(page) == ["test.late-second", "test.early-second"]
    assert [row["action"] for row in download(client, csv_link(page))] == shown_actions(page)


def test_a_filter_the_page_did_not_understand_is_left_out_of_the_link(
    pool: Any, page_as: Any
) -> None:
    do_set_node_cordoned(
        Node.objects.get(name="n2"), cordoned=True, acting_user=pool.users["ada"], reason="rma"
    )
    client = page_as("ada")
    # nobody-at-all made no change and is no user: the page ignores that filter, and so
    # does its link (the API would keep no change by them).
    page = text(client.get("/audit/?actor=nobody-at-all&made_by=people"))
    assert "“nobody-at-all” was not understood" in page and "1 change match" in page
    assert "actor=" not in csv_link(page)
    assert [row["action"] for row in download(client, csv_link(page))] == shown_actions(page)


def test_only_an_admin_downloads_the_log(pool: Any, page_as: Any) -> None:
    link = csv_link(text(page_as("ada").get("/audit/")))
    for name in ("lena", "max", "fin"):
        assert page_as(name).get(link).status_code == 403, name
