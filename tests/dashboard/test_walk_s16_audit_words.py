"""Walk-through s16: the Audit page reads in words, not in the code's names. An action is its
label ("approved a quota request", ``gpupool.audit.words.ACTION_LABELS``, which every action
name the code records has), the object its kind in words and id ("quota request #5") under
its own summary, a field its label (the model field's verbose name: "decided by"), a user's
id their username (one query for the page), a moment in the viewer's zone as the rest of the
page writes it, and a field whose two values read the same is no change. The filters' options
are in words, their values the stored names (old links keep working); a filter value the page
cannot take is said ("not understood") beside its field and ignored.

The pool (``conftest``): ``lena`` leads nlp, ``ada`` is an admin; the fixture's own changes
were made by the system.
"""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from dashboard_pages import rows, text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from two_teams import quota_request

import gpupool
from gpupool.audit.actions import record_audit_event
from gpupool.audit.models import AuditEvent
from gpupool.audit.words import ACTION_LABELS, action_label
from gpupool.inventory.actions import do_drain_node
from gpupool.inventory.models import Node
from gpupool.quotas.actions import do_approve_quota_request
from gpupool.quotas.choices import LedgerEntryKind
from gpupool.quotas.models import QuotaRequest

SOURCE = Path(gpupool.__file__).parent
NONE = "\N{EN DASH}"  # what the page writes for no value


def recorded_action_names() -> set[str]:
    """Every action name the code records: ``action="app.verb"`` arguments, the first argument
    of ``record_system_audit_rows``/``_events``, and the two names built with an f-string
    (a ledger move's kind, a quota request's verb: ``_audit_request``'s, and the decision's
    ``verb = "approve" if ... else "reject"``) expanded from what they are built of."""
    names: set[str] = set()
    verbs: set[str] = set()
    for path in SOURCE.rglob("*.py"):
        if "/audit/" in str(path):
            continue
        source = path.read_text()
        names |= set(re.findall(r'\baction="([a-z_]+\.[a-z_]+)"', source))
        names |= set(re.findall(r'record_system_audit_\w+\(\s*"([a-z_]+\.[a-z_]+)"', source))
        verbs |= set(re.findall(r'_audit_request\([^()]*?"([a-z]+)"', source))
        for chosen in re.findall(r'\bverb = "([a-z]+)" if \w+ else "([a-z]+)"', source):
            verbs |= set(chosen)
        for built in re.findall(r'\baction=f"([^"]+)"', source):
            if built == "quotas.{kind}_budget":
                names |= {f"quotas.{kind}_budget" for kind in LedgerEntryKind.values}
            elif built == "quotas.{action}_quota_request":
                names.add(built)  # expanded below, once every verb is read
            else:
                raise AssertionError(f"an action name built in {path}: {built}; expand it here")
    if "quotas.{action}_quota_request" in names:
        names.remove("quotas.{action}_quota_request")
        assert {"create", "submit", "approve", "reject", "apply"} <= verbs
        names |= {f"quotas.{verb}_quota_request" for verb in verbs}
    return names


def test_every_action_the_code_records_has_a_label_in_words() -> None:
    names = recorded_action_names()
    assert len(names) > 30 and "quotas.approve_quota_request" in names
    missing = sorted(names - set(ACTION_LABELS))
    assert not missing, f"no label in gpupool.audit.words.ACTION_LABELS for {missing}"
    for name in names:
        label = action_label(name)
        assert re.fullmatch(r"[a-z][a-zA-Z' -]+", label), (name, label)
    assert action_label("quotas.approve_quota_request") == "approved a quota request"


def visible(page: str) -> str:
    """The text a reader sees: no tags, no attributes."""
    return unescape(re.sub(r"<[^>]+>", " ", page))


def approved(pool: Any) -> QuotaRequest:
    """lena's request for nlp's h100 levels 6 / 10 / 16, approved by ada."""
    request = quota_request(pool, justification="a deadline", submit=True)
    return do_approve_quota_request(request, acting_user=pool.users["ada"], note="fine")


def test_an_approval_reads_in_words_with_the_deciders_name_and_times_in_the_viewers_zone(
    pool: Any, page_as: Any
) -> None:
    request = approved(pool)
    event = AuditEvent.objects.get(action="quotas.approve_quota_request")
    client = page_as("ada")
    client.cookies["gpupool_tz"] = "Europe/Berlin"
    page = text(client.get("/audit/?action=quotas.approve_quota_request"))
    seen = visible(rows(page))
    assert "approved a quota request" in seen
    assert f"quota request #{request.pk}" in seen and str(request) in seen
    assert re.search(rf"decided by:\s+{NONE}\s+→\s+ada", seen)
    assert "state: submitted → approved" in seen
    assert re.search(rf"decision note:\s+{NONE}\s+→\s+fine", seen)  # empty reads as none
    decided = request.decided_at
    assert decided is not None
    berlin = decided.astimezone(ZoneInfo("Europe/Berlin"))
    assert re.search(rf"decided at:\s+{NONE}\s+→\s+{berlin:%Y-%m-%d %H:%M} UTC\+1", seen)
    for internal in ("quotas.", "decided_by_id", "quotarequest", "True", "False"):
        assert internal not in seen, internal
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", seen)  # no raw ISO moment
    assert str(event.after["decided_at"]) not in seen


def test_a_field_whose_values_read_the_same_is_no_change(pool: Any, page_as: Any) -> None:
    record_audit_event(
        acting_user=None,
        action="quotas.cycle_budget",
        instance=pool.nlp,
        before={"remaining_gpu_hours": "499.4200", "gpu_hours": "600.000"},
        after={"remaining_gpu_hours": "499.42", "gpu_hours": "601.000"},
    )
    seen = visible(rows(text(page_as("ada").get("/audit/?action=quotas.cycle_budget"))))
    assert "moved a budget's GPU-hours at a scheduling cycle" in seen
    assert "GPU-hours remaining" not in seen  # 499.42 GPU-h both times
    assert re.search(r"GPU-hours:\s+600 GPU-h\s+→\s+601 GPU-h", seen), seen


def test_a_drain_names_its_fields_in_words(pool: Any, page_as: Any) -> None:
    do_drain_node(Node.objects.get(name="n2"), acting_user=pool.users["ada"], reason="rma")
    seen = visible(rows(text(page_as("ada").get("/audit/?action=inventory.drain_node"))))
    assert "started draining a node" in seen and "node #" in seen
    assert re.search(r"drain requested:\s+no\s+→\s+yes", seen)
    assert "drain_requested" not in seen


def test_the_users_the_changes_name_are_read_in_one_query(pool: Any, page_as: Any) -> None:
    client = page_as("ada")

    def name_users(names: list[str]) -> int:
        for name in names:
            record_audit_event(
                acting_user=None,
                action="quotas.approve_quota_request",
                instance=pool.nlp,
                before={"decided_by_id": None},
                after={"decided_by_id": pool.users[name].pk},
            )
        with CaptureQueriesContext(connection) as queries:
            page = text(client.get("/audit/?action=quotas.approve_quota_request"))
        for name in names:
            assert re.search(rf"decided by:\s+{NONE}\s+→\s+{name}\b", visible(rows(page)))
        return len(queries)

    one = name_users(["lena"])
    many = name_users(["max", "vera", "vic", "fin"])
    assert many == one


def test_the_filters_options_are_in_words_and_keep_their_values(pool: Any, page_as: Any) -> None:
    approved(pool)
    page = text(page_as("ada").get("/audit/?object_type=quotas.quotarequest"))
    assert '<option value="quotas.approve_quota_request">approved a quota request</option>' in page
    assert '<option value="quotas.quotarequest" selected>quota request</option>' in page
    assert '<option value="tenancy.tenant">team</option>' in page
    seen = visible(rows(page))
    assert "submitted a quota request" in seen and "synced a node" not in seen


def test_a_filter_value_the_page_cannot_take_is_said_and_ignored(pool: Any, page_as: Any) -> None:
    approved(pool)
    client = page_as("ada")
    total = AuditEvent.objects.count()
    made_by = unescape(text(client.get("/audit/?made_by=xyz")))
    assert "“xyz” was not understood: pick people or the system." in made_by
    assert 'id="id_made_by-not-understood"' in made_by
    assert f"{total} changes, newest first" in made_by
    actor = unescape(text(client.get("/audit/?actor=nobody-at-all")))
    assert "“nobody-at-all” was not understood" in actor
    assert f"{total} changes, newest first" in actor
    day = unescape(text(client.get("/audit/?since=2026-12-40&action=quotas.submit_quota_request")))
    assert "“2026-12-40” was not understood: a day is written YYYY-MM-DD" in day
    assert "1 change matches" in day  # the action filter still applies
    assert "Enter a valid date" not in day


def test_an_unknown_action_name_still_reads_by_its_parts() -> None:
    assert action_label("test.early-second") == "test: early-second"
