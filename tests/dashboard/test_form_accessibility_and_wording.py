"""The forms read right to a screen reader, and their refusals and summaries read right to
everyone: every ``aria-describedby`` names an element of the page (a field's help is
"<auto_id>_helptext", its error list "<auto_id>_error", the ids Django's widgets point at); an
action's refusal that names no field shows on the request form instead of failing the page; a
request's feasibility problems name their fields in words; a request's summary and the charts'
hovers write GPUs and GPU-hours in the pages' format (``gpupool.number_formats``)."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from dashboard_pages import SUBMIT_FORM, form_errors, text
from django.core import mail
from django.core.exceptions import ValidationError
from domain_builders import period_fields, this_month
from two_teams import budget_request, quota_request

from gpupool.dashboard import charts, views
from gpupool.dashboard.forms import QuotaRequestForm
from gpupool.dashboard.templatetags.dashboard import gpu_hours, gpus
from gpupool.quotas import actions as quota_actions
from gpupool.quotas.actions import (
    decision_refusal,
    quota_request_problems,
)
from gpupool.quotas.models import MAX_GRANT_GPU_HOURS, PriorityBudget, QuotaRequest, period_words


class DescribedBy(HTMLParser):
    """A page's element ids, the ids its ``aria-describedby`` attributes name, and the text
    of each element with an id (its first text only: enough for a help paragraph)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.named: list[tuple[str, str]] = []  # (the describing id, the element's name)
        self.texts: dict[str, str] = {}
        self._open: str | None = None
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
            self._open = str(found["id"])
        for named in (found.get("aria-describedby") or "").split():
            self.named.append((named, str(found.get("name") or found.get("id") or tag)))

    def handle_data(self, data: str) -> None:
        if self._open is not None and data.strip():
            self.texts.setdefault(self._open, data.strip())
            self._open = None


def described(page: str) -> DescribedBy:
    """The page parsed, asserting every ``aria-describedby`` names an element it holds."""
    parsed = DescribedBy(page)
    missing = [(named, element) for named, element in parsed.named if named not in parsed.ids]
    assert missing == [], f"aria-describedby names ids the page lacks: {missing}"
    return parsed


def ask(pool: Any, **changes: Any) -> dict[str, Any]:
    """The request form for nlp's h100 quota (6 / 10 / 16), with ``changes``."""
    return {
        "kind": "queue-quota",
        "queue": pool.nlp_queue.pk,
        "flavor": pool.h100.pk,
        "guarantee": "6",
        "deserved": "10",
        "capability": "16",
        "justification": "the new model needs more guaranteed GPUs",
    } | changes


def budget_ask(pool: Any, **changes: Any) -> dict[str, Any]:
    """The request form for GPU-hours added to nlp's budget of this month at class high."""
    return {
        "kind": "budget",
        "tenant": pool.nlp.pk,
        "priority_class": pool.high.pk,
        **period_fields(),
        "gpu_hours": "10",
        "justification": "a deadline",
    } | changes


# ----------------------------------------------------------------------------- 1 help and errors


def test_the_request_forms_help_is_the_element_its_field_is_described_by(
    pool: Any, page_as: Any
) -> None:
    # when a lead opens the request form
    parsed = described(text(page_as("lena").get("/requests/")))
    # then the justification is described by its help, which the page holds, saying it
    assert ("id_justification_helptext", "justification") in parsed.named
    assert parsed.texts["id_justification_helptext"].startswith("Why the team needs it")


def test_a_refused_request_forms_fields_are_described_by_their_help_and_their_errors(
    pool: Any, page_as: Any
) -> None:
    # when a lead files a request with a negative guarantee and no justification
    page = text(page_as("lena").post("/requests/", ask(pool, guarantee="-1", justification="")))
    # then every aria-describedby names an element of the page: help and errors alike
    parsed = described(page)
    assert ("id_justification_helptext", "justification") in parsed.named
    assert ("id_justification_error", "justification") in parsed.named
    assert ("id_guarantee_error", "guarantee") in parsed.named
    assert QuotaRequest.objects.count() == 0


def test_the_submit_forms_fields_are_described_by_elements_of_the_page(
    pool: Any, page_as: Any
) -> None:
    client = page_as("max")
    # the form as it opens: each field with help is described by it
    opened = described(text(client.get("/workloads/")))
    assert ("id_name_helptext", "name") in opened.named
    assert ("id_expected_hours_helptext", "expected_hours") in opened.named
    # a refused name: its help and its error, both on the page
    refused = described(text(client.post("/workloads/submit/", SUBMIT_FORM | {"name": "Train_1"})))
    assert ("id_name_helptext", "name") in refused.named
    assert ("id_name_error", "name") in refused.named


def test_the_decisions_comment_is_described_by_its_help_and_its_error(
    pool: Any, page_as: Any
) -> None:
    request = quota_request(pool, submit=True)
    client = page_as("ada")
    opened = described(text(client.get(f"/approvals/{request.pk}/")))
    assert ("id_decision_note_helptext", "decision_note") in opened.named
    # a rejection without a comment: refused beside the Comment, described by both
    refused = described(text(client.post(f"/approvals/{request.pk}/", {"decision": "reject"})))
    assert ("id_decision_note_helptext", "decision_note") in refused.named
    assert ("id_decision_note_error", "decision_note") in refused.named


# ----------------------------------------------------------------------------- 2 plain refusals


def test_a_refusal_that_names_no_field_goes_on_the_request_form(pool: Any) -> None:
    # given a valid request form
    form = QuotaRequestForm(ask(pool), queues=[pool.nlp_queue], tenants=[pool.nlp])
    assert form.is_valid(), form.errors
    # when the action refuses it with a plain message, naming no field
    form.add_refusal(ValidationError("requests are closed until the audit ends"))
    # then the form says it, on the form itself
    assert form.non_field_errors() == ["requests are closed until the audit ends"]
    assert not any(form.errors.get(name) for name in form.fields)


def test_a_plain_refusal_of_the_filing_action_shows_on_the_page_and_files_nothing(
    pool: Any, page_as: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a filing action that refuses with a message that names no field
    def refuse(**kwargs: Any) -> QuotaRequest:
        raise ValidationError("requests are closed until the audit ends")

    monkeypatch.setattr(views, "do_create_quota_request", refuse)
    # when a lead files a request
    response = page_as("lena").post("/requests/", ask(pool))
    # then the form comes back with the refusal above it, and nothing is filed
    assert response.status_code == 400
    assert "requests are closed until the audit ends" in form_errors(text(response))
    assert QuotaRequest.objects.count() == 0


# ----------------------------------------------------------------------------- 3 problems in words


def test_a_grant_past_what_the_ledger_holds_is_a_problem_of_gpu_hours_in_words(
    pool: Any,
) -> None:
    # given nlp's budget of this month granting all but 5 GPU-hours of what a grant may hold
    request = budget_request(pool, "10", granted=MAX_GRANT_GPU_HOURS - 5, submit=True)
    # when the feasibility check and the approval's refusal say why it does not fit
    problems = quota_request_problems(request)
    refusal = decision_refusal(request, acting_user=pool.users["ada"], approve=True)
    # then they name GPU-hours in words, and the API's error key stays the field name
    assert len(problems) == 1 and problems[0].startswith("GPU-hours: a grant holds at most")
    assert isinstance(refusal, ValidationError)
    assert list(refusal.message_dict) == ["payload"]
    assert refusal.message_dict["payload"][0].startswith(
        "the change would not fit: GPU-hours: a grant holds at most"
    )
    assert "gpu_hours" not in refusal.message_dict["payload"][0]


def test_an_addition_naming_another_period_end_is_a_problem_of_the_period_in_words(
    pool: Any,
) -> None:
    request = budget_request(pool, "10", granted=20, submit=True)
    # Filing refuses another end at once; the budget's end moving since is what is left.
    PriorityBudget.objects.filter(tenant=pool.nlp).update(period_end=this_month(months=1)[1])
    problems = quota_request_problems(request)
    assert len(problems) == 1
    start = this_month()[0]
    assert problems[0].startswith(f"period until: the budget of nlp at high from {start:%Y-%m-%d}")
    assert "period_end" not in problems[0]


def test_a_problem_that_names_no_field_is_said_without_a_field(
    pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = budget_request(pool, "10", granted=20, submit=True)

    def closed(*args: Any, **kwargs: Any) -> Any:
        raise ValidationError("the ledger is closed for the month")

    monkeypatch.setattr(quota_actions, "_budget_with_addition", closed)
    assert quota_request_problems(request) == ["the ledger is closed for the month"]


# ----------------------------------------------------------------------------- 4 summaries


def test_a_requests_summary_writes_its_amounts_in_the_pages_format(pool: Any) -> None:
    budget = budget_request(pool, "1234.567", granted=20, submit=True)
    start, end = this_month()
    assert budget.summary() == (
        f"budget of nlp at high, {period_words(start, end)}: 1,234.57 GPU-hours more"
    )
    assert gpu_hours("1234.567") == "1,234.57 GPU-h"  # the pages' number, the same
    # Whole GPUs on an exclusive flavor (``whole_gpu_errors``): the trailing zeros go.
    quota = quota_request(pool, guarantee="6.000", capability="16.000")
    assert quota.summary() == (
        "queue nlp h100: guarantee 6 GPUs, deserved 10 GPUs, capability 16 GPUs"
    )
    assert gpus("16.125") == "16.125 GPUs"


def test_a_summary_keeps_an_amount_that_is_no_number_as_the_payload_holds_it(pool: Any) -> None:
    request = QuotaRequest(
        kind="budget",
        tenant=pool.nlp,
        priority_class=pool.high,
        period_start=this_month()[0],
        period_end=this_month()[1],
        payload={"gpu_hours": "lots"},
    )
    assert request.summary().endswith(": lots GPU-hours more")


def test_the_message_and_the_admins_mail_of_a_filed_budget_request_round_its_gpu_hours(
    pool: Any, page_as: Any
) -> None:
    # when a lead files 12.500 GPU-hours from the page
    response = page_as("lena").post("/requests/", budget_ask(pool, gpu_hours="12.500"), follow=True)
    # then the page's message and the admins' mail say 12.5, as the pages write GPU-hours
    assert f"{period_words(*this_month())}: 12.5 GPU-hours more" in text(response)
    assert "12.500" not in text(response)
    bodies = [message.body for message in mail.outbox]
    assert any("12.5 GPU-hours more" in body for body in bodies)
    assert not any("12.500" in body for body in bodies)


# ----------------------------------------------------------------------------- 5 chart hovers


def hovers(figure: dict[str, Any]) -> list[str]:
    return [trace["hovertemplate"] for trace in figure["data"]]


def test_gpu_hour_hovers_show_at_most_two_places_without_trailing_zeros() -> None:
    figure = charts.cost_trend_figure(
        ["2026-11", "2026-12"], {"nlp": [12.5, 1234.256]}, [360.0, None], {"nlp": "#000000"}
    )
    assert hovers(figure) == [
        "nlp: %{y:,.2~f} GPU-h<extra>%{x}</extra>",
        "healthy capacity: %{y:,.2~f} GPU-h<extra>%{x}</extra>",
    ]


@pytest.mark.parametrize(
    "figure",
    [
        charts.allocation_area_figure(["t"], {"nlp · h100": [0.125]}, {}),
        charts.fragmentation_trend_figure(["t"], {"free": [3.5]}),
        charts.allocated_vs_active_figure(["t"], [8.125], [4.5], capacity=15.0),
        charts.team_utilization_figure(["t"], {"nlp": [8.125]}, {"nlp": [4.5]}, {}),
    ],
    ids=["allocation", "fragmentation trend", "allocated vs active", "team utilisation"],
)
def test_gpu_hovers_show_at_most_three_places_without_trailing_zeros(
    figure: dict[str, Any],
) -> None:
    for hover in hovers(figure):
        assert "%{y:,.3~f} GPUs" in hover, hover
