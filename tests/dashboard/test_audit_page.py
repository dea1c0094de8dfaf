"""The Audit page: who changed what and when, filtered by actor, action, object type and
days (in the viewer's zone), paginated."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from dashboard_pages import rows, text
from django.utils import timezone
from domain_builders import user

from gpupool.audit.actions import record_audit_event
from gpupool.audit.models import AuditEvent
from gpupool.dashboard.views import AUDIT_PAGE_SIZE
from gpupool.inventory.actions import do_set_node_cordoned
from gpupool.inventory.models import Node
from gpupool.tenancy.actions import do_grant_site_role


def test_the_log_shows_who_changed_what_with_the_values_before_and_after(
    pool: Any, page_as: Any
) -> None:
    do_set_node_cordoned(
        Node.objects.get(name="n2"), cordoned=True, acting_user=pool.users["ada"], reason="rma"
    )
    page = text(page_as("ada").get("/audit/"))
    cell = '<td title="inventory.set_node_cordoned">cordoned or uncordoned a node</td>'
    row = page.split(cell, 1)[1].split("</tr>", 1)[0]
    assert "<li>cordoned: no → yes</li>" in row and "rma" in row
    assert "<td>ada</td>" in page.split(cell, 1)[0][-200:]
    assert "<td>system</td>" in page  # the fixture's changes were made by nobody


def test_the_log_filters_by_actor_action_and_object_type(pool: Any, page_as: Any) -> None:
    do_set_node_cordoned(
        Node.objects.get(name="n2"), cordoned=True, acting_user=pool.users["ada"], reason="rma"
    )
    client = page_as("ada")
    by_ada = text(client.get("/audit/?actor=ada"))
    assert "1 change match" in by_ada
    by_system = rows(text(client.get("/audit/?actor=system")))
    assert "inventory.set_node_cordoned" not in by_system and "inventory.sync_node" in by_system
    by_action = text(client.get("/audit/?action=quotas.set_queue_quota"))
    assert "2 changes match" in by_action
    by_type = rows(text(client.get("/audit/?object_type=inventory.node")))
    assert "inventory.sync_node" in by_type and "quotas.set_queue_quota" not in by_type
    nothing = text(client.get("/audit/?actor=nobody"))  # a user who changed nothing
    assert "No change matches these filters" in nothing


def test_peoples_changes_apart_from_the_systems(pool: Any, page_as: Any) -> None:
    """The loop's budget flushes and the cluster sync outnumber people's changes by far:
    "Made by people" shows only changes someone made, "the system" only the others."""
    do_set_node_cordoned(
        Node.objects.get(name="n2"), cordoned=True, acting_user=pool.users["ada"], reason="rma"
    )
    client = page_as("ada")
    people = text(client.get("/audit/?made_by=people"))
    assert "1 change match" in people
    assert "inventory.set_node_cordoned" in rows(people)
    assert "inventory.sync_node" not in rows(people)
    system = text(client.get("/audit/?made_by=system"))
    total = AuditEvent.objects.count()
    assert f"{total - 1} changes match" in system
    assert "inventory.sync_node" in rows(system) and "set_node_cordoned" not in rows(system)
    assert '<option value="people" selected>people</option>' in people
    refused = text(client.get("/audit/?made_by=robots"))
    assert "“robots” was not understood" in refused and f"{total} changes, newest first" in refused


def test_days_are_the_viewers_days(pool: Any, page_as: Any) -> None:
    # 23:30 on 1 March in Tokyo is 14:30 UTC the same day; at 00:30 on 2 March in Tokyo
    # it is still 1 March in UTC.
    tokyo = ZoneInfo("Asia/Tokyo")
    for hour, minute, what in ((23, 30, "late-first"), (0, 30, "early-second")):
        day = 1 if what == "late-first" else 2
        event = record_audit_event(
            acting_user=None,
            action=f"test.{what}",
            instance=pool.nlp,
            before=None,
            after={"name": "nlp"},
        )
        AuditEvent.objects.filter(pk=event.pk).update(
            at=datetime(2026, 3, day, hour, minute, tzinfo=tokyo)
        )
    client = page_as("ada")
    client.cookies["gpupool_tz"] = "Asia/Tokyo"
    page = rows(text(client.get("/audit/?since=2026-03-02&until=2026-03-02")))
    assert "test.early-second" in page and "test.late-first" not in page
    assert "2026-03-02 00:30 UTC+9" in page


def test_the_log_is_paginated_newest_first(pool: Any, page_as: Any) -> None:
    start = timezone.now() - timedelta(days=1)
    for index in range(AUDIT_PAGE_SIZE + 5):
        event = record_audit_event(
            acting_user=None,
            action=f"test.step-{index:03d}",
            instance=pool.nlp,
            before=None,
            after={"index": index},
        )
        AuditEvent.objects.filter(pk=event.pk).update(at=start + timedelta(hours=1, minutes=index))
    client = page_as("ada")
    first = rows(text(client.get("/audit/?object_type=tenancy.tenant")))
    assert f"test.step-{AUDIT_PAGE_SIZE + 4:03d}" in first and "test.step-000" not in first
    assert "Older</a>" in first
    second = rows(text(client.get("/audit/?object_type=tenancy.tenant&page=2")))
    assert "test.step-000" in second and "Newer</a>" in second


def test_an_empty_log_says_what_it_will_hold(db: Any, client: Any) -> None:
    admin = user("root")
    do_grant_site_role(admin, role="admin", acting_user=None)
    AuditEvent.objects.all().delete()
    client.force_login(admin)
    assert "Nothing has been changed yet" in text(client.get("/audit/"))


def test_an_unordered_span_is_refused_on_the_form(pool: Any, page_as: Any) -> None:
    page = text(page_as("ada").get("/audit/?since=2026-03-02&until=2026-03-01"))
    assert "must not be before From" in page
