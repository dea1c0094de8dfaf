"""Quota and budget requests from the command line, against a live test server: a lead files
them (``gpupool request quota|budget``), everyone who may sees them (``gpupool requests``:
finance every team's), an admin approves or rejects them (``gpupool approve|reject``). Bad
flags are usage errors naming the flag, before any call; what only the server knows is its
refusal, printed with the field it names."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from client_cli import run
from domain_builders import flavor, node, period_fields, priority_class, queue, quota, tenant, user

from gpupool.api.actions import do_issue_token
from gpupool.client.main import (
    DECISION_NOTE_MAX_LENGTH,
    JUSTIFICATION_MAX_LENGTH,
    MAX_REQUEST_GPU_HOURS,
    MAX_REQUEST_GPUS,
    REQUEST_AMOUNT_PLACES,
    REQUEST_KINDS,
    REQUEST_STATES,
)
from gpupool.quotas import models as quota_models
from gpupool.quotas.choices import QuotaRequestKind, QuotaRequestState
from gpupool.quotas.models import QueueQuota, QuotaRequest
from gpupool.quotas.requests_api import DecisionSerializer
from gpupool.tenancy.actions import do_grant_site_role

QUOTA = (
    "request", "quota", "--queue", "nlp-train", "--flavor", "h100",
    "--guarantee", "2", "--deserved", "8", "--capability", "24",
    "--justification", "the new model trains for a month",
)  # fmt: skip


def budget(**fields: str) -> tuple[str, ...]:
    """``gpupool request budget`` for nlp at class high, this month, 40 GPU-hours."""
    given = {
        "tenant": "nlp",
        "priority-class": "high",
        "period-start": period_fields()["period_start"],
        "period-end": period_fields()["period_end"],
        "gpu-hours": "40",
        "justification": "the demo week",
    } | fields
    flags = [part for name, value in given.items() for part in (f"--{name}", value)]
    return ("request", "budget", *flags)


# ----------------------------------------------------------------------------- live server


@pytest.fixture
def pool(live_client: Any) -> dict[str, str]:
    """h100 nodes under root: queue nlp-train (tenant nlp, led by lena; 0 / 8 / 16) and
    vision-train (tenant vision, led by vera); classes normal (default, free) and high
    (budget rate 1). Tokens of lena, vera, ada (an admin) and fin (finance)."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    node("n2", h100, gpus=8)
    priority_class("normal", default=True)
    priority_class("high", value=100, budget_rate=Decimal(1))
    root = queue("root")
    lena, vera, fin = user("lena"), user("vera"), user("fin")
    do_grant_site_role(fin, role="finance", acting_user=None)
    nlp = tenant("nlp", lead=lena, namespaces=("nlp",))
    vision = tenant("vision", lead=vera, namespaces=("vision",))
    quota(queue("nlp-train", parent=root, tenant=nlp), h100, 0, 8, 16)
    quota(queue("vision-train", parent=root, tenant=vision), h100, 0, 8, 16)
    return {
        "lena": do_issue_token(lena).key,
        "vera": do_issue_token(vera).key,
        "ada": do_issue_token(user("ada", admin=True)).key,
        "fin": do_issue_token(fin).key,
    }


@pytest.fixture
def as_user(pool: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run the client as one of the pool's users, by name."""

    def call(name: str, *argv: str) -> tuple[int, str, str]:
        monkeypatch.setenv("GPUPOOL_TOKEN", pool[name])
        return run(*argv)

    return call


@pytest.mark.django_db(transaction=True)
def test_a_lead_files_a_quota_request_and_an_admin_approves_it(as_user: Any) -> None:
    status, out, err = as_user("lena", *QUOTA)
    assert status == 0, err
    filed = QuotaRequest.objects.get()
    assert out == (
        f"Request #{filed.pk} is submitted: queue nlp-train h100: guarantee 2 GPUs, "
        "deserved 8 GPUs, capability 24 GPUs.\n"
    )
    assert (filed.state, filed.payload) == (
        "submitted",
        {"guarantee": "2", "deserved": "8", "capability": "24"},
    )
    status, out, err = as_user("lena", "requests", "--state", "submitted")
    assert status == 0, err
    header, row = out.splitlines()
    assert header.split() == ["REQUEST", "KIND", "STATE", "TENANT", "BY", "SUBMITTED", "WHAT"]
    assert row.startswith(f"#{filed.pk}") and "queue-quota  submitted  nlp" in row
    assert "lena" in row and "guarantee 2 GPUs, deserved 8 GPUs, capability 24 GPUs" in row

    status, out, err = as_user("ada", "approve", f"#{filed.pk}", "--reason", "fits the pool")
    assert status == 0, err
    assert out.startswith(f"Request #{filed.pk} is applied: queue nlp-train h100")
    filed.refresh_from_db()
    assert (filed.state, filed.decision_note) == ("applied", "fits the pool")
    level = QueueQuota.objects.get(queue__name="nlp-train")
    assert (level.guarantee, level.deserved, level.capability) == (2, 8, 24)


@pytest.mark.django_db(transaction=True)
def test_a_budget_request_kept_as_a_draft_and_one_rejected_with_a_reason(as_user: Any) -> None:
    status, out, err = as_user("lena", *budget(), "--draft")
    assert status == 0, err
    draft = QuotaRequest.objects.get()
    assert out.startswith(f"Request #{draft.pk} is a draft: budget of nlp at high, ")
    assert "40 GPU-hours more." in out and "Only you see a draft" in out
    assert (draft.kind, draft.state, draft.payload) == ("budget", "draft", {"gpu_hours": "40"})

    status, out, err = as_user("vera", *budget(tenant="vision", **{"gpu-hours": "12.5"}))
    assert status == 0, err
    vision = QuotaRequest.objects.get(tenant__name="vision")
    assert vision.state == "submitted" and vision.payload == {"gpu_hours": "12.5"}

    status, out, err = as_user("ada", "reject", str(vision.pk), "--reason", "not this month")
    assert status == 0, err
    assert out.startswith(f"Request #{vision.pk} is rejected: budget of vision at high")
    vision.refresh_from_db()
    assert (vision.state, vision.decision_note) == ("rejected", "not this month")


@pytest.mark.django_db(transaction=True)
def test_finance_lists_every_team_s_requests_and_cannot_decide_one(as_user: Any) -> None:
    assert as_user("lena", *QUOTA)[0] == 0
    assert as_user("vera", *budget(tenant="vision"))[0] == 0
    assert as_user("lena", *budget(), "--draft")[0] == 0  # lena's own: nobody else sees it
    status, out, err = as_user("fin", "requests")
    assert status == 0, err
    rows = out.splitlines()[1:]
    assert sorted(row.split()[1:4] for row in rows) == [
        ["budget", "submitted", "vision"],
        ["queue-quota", "submitted", "nlp"],
    ]
    status, out, _ = as_user("fin", "--json", "requests", "--kind", "budget")
    assert [(r["kind"], r["tenant"]) for r in json.loads(out)] == [("budget", "vision")]

    quota_request = QuotaRequest.objects.get(kind="queue-quota")
    status, out, err = as_user("fin", "approve", str(quota_request.pk))
    assert (status, out) == (1, "")
    assert err == "gpupool: Your role does not allow this.\n"
    quota_request.refresh_from_db()
    assert quota_request.state == "submitted"
    # vera leads vision only: nlp's requests are not hers to see
    status, out, _ = as_user("vera", "requests")
    assert [row.split()[3] for row in out.splitlines()[1:]] == ["vision"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("argv", "field", "printed", "said"),
    [
        # vision's queue is not one lena may ask quota for: an unknown name to her
        (
            ("request", "quota", "--queue", "vision-train", *QUOTA[4:]),
            "queue",
            "--queue",
            "vision-train",
        ),
        # a class that costs no budget needs none
        (
            budget(**{"priority-class": "normal"}),
            "priority_class",
            "--priority-class",
            "budget rate of 0",
        ),
        # the levels the queue has already (the three levels: no one flag)
        (
            (*QUOTA[:6], "--guarantee", "0", "--deserved", "8", "--capability", "16", *QUOTA[12:]),
            "payload",
            "payload",
            "already",
        ),
    ],
)
def test_a_refusal_of_the_api_is_printed_with_its_field(
    as_user: Any, argv: tuple[str, ...], field: str, printed: str, said: str
) -> None:
    """Printed naming the flag that sets the field (the API's field with ``--json``)."""
    status, out, err = as_user("lena", *argv)
    assert (status, out) == (1, "")
    assert err.startswith(f"gpupool: {printed}: ") and said in err
    status, out, err = as_user("lena", "--json", *argv)
    assert status == 1 and out == ""
    refusal = json.loads(err)["error"]
    assert refusal["status"] == 400 and said in " ".join(refusal["fields"][field])
    assert not QuotaRequest.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_rejecting_a_request_already_decided_says_where_it_stands(as_user: Any) -> None:
    assert as_user("lena", *QUOTA)[0] == 0
    filed = QuotaRequest.objects.get()
    assert as_user("ada", "approve", str(filed.pk))[0] == 0
    status, _, err = as_user("ada", "reject", str(filed.pk), "--reason", "changed my mind")
    assert status == 1
    # The sentence names where the request stands; the field's name is not said (s23).
    assert err.startswith(f"gpupool: request #{filed.pk} ") and "state:" not in err


# ----------------------------------------------------------------------------- bad flags


def with_flag(argv: tuple[str, ...], flag: str, value: str) -> tuple[str, ...]:
    """``argv`` with ``flag``'s value replaced by ``value``."""
    index = argv.index(flag)
    return (*argv[: index + 1], value, *argv[index + 2 :])


def without_flag(argv: tuple[str, ...], flag: str) -> tuple[str, ...]:
    index = argv.index(flag)
    return (*argv[:index], *argv[index + 2 :])


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (with_flag(QUOTA, "--guarantee", "lots"), "--guarantee"),
        (with_flag(QUOTA, "--deserved", "-1"), "--deserved"),
        (with_flag(QUOTA, "--capability", "1.2345"), "--capability"),
        (with_flag(QUOTA, "--capability", "nan"), "--capability"),
        (with_flag(QUOTA, "--capability", "10000000"), "--capability"),
        (with_flag(QUOTA, "--guarantee", "9"), "--guarantee (9) must not exceed --deserved (8)"),
        (with_flag(QUOTA, "--capability", "4"), "--deserved (8) must not exceed --capability (4)"),
        (  # every pair out of order at once
            with_flag(with_flag(QUOTA, "--guarantee", "10"), "--capability", "3"),
            "--guarantee (10) must not exceed --deserved (8); "
            "--deserved (8) must not exceed --capability (3)",
        ),
        (with_flag(QUOTA, "--justification", "  "), "--justification"),
        (
            with_flag(QUOTA, "--justification", "x" * (JUSTIFICATION_MAX_LENGTH + 1)),
            "--justification",
        ),
        (without_flag(QUOTA, "--queue"), "--queue"),
        (("request",), "quota,budget"),
        (budget(**{"period-start": "2026-13-01"}), "--period-start"),
        (
            budget(**{"period-start": "2026-12-01", "period-end": "2026-12-01"}),
            "--period-end (2026-12-01) must be after --period-start (2026-12-01)",
        ),
        (budget(**{"gpu-hours": "0"}), "--gpu-hours"),
        (budget(**{"gpu-hours": "100000000"}), "--gpu-hours"),
        (without_flag(budget(), "--tenant"), "--tenant"),
        (("requests", "--state", "pending"), "--state"),
        (("requests", "--kind", "quotas"), "--kind"),
        (("approve", "twelve"), "REQUEST"),
        (("reject", "12"), "--reason"),
        (("reject", "12", "--reason", " "), "--reason"),
        (("approve", "12", "--reason", "x" * (DECISION_NOTE_MAX_LENGTH + 1)), "--reason"),
    ],
)
@pytest.mark.usefixtures("nowhere")
def test_a_bad_flag_is_a_usage_error_naming_it(
    argv: tuple[str, ...], named: str, capsys: Any
) -> None:
    status, out, err = run(*argv)
    assert status == 2 and out == ""
    assert named in err + capsys.readouterr().err
    status, out, err = run("--json", *argv)
    assert status == 2 and out == ""
    error = json.loads(err)["error"]
    assert error["code"] == "usage" and named in error["message"]


def test_the_client_s_request_words_and_bounds_are_the_server_s() -> None:
    assert set(REQUEST_STATES) == set(QuotaRequestState.values)
    assert set(REQUEST_KINDS) == set(QuotaRequestKind.values)
    limits = quota_models.PAYLOAD_LIMITS
    assert {limits[key] for key in quota_models.QUEUE_QUOTA_KEYS} == {
        (MAX_REQUEST_GPUS, REQUEST_AMOUNT_PLACES)
    }
    assert limits["gpu_hours"] == (MAX_REQUEST_GPU_HOURS, REQUEST_AMOUNT_PLACES)
    assert quota_models.JUSTIFICATION_MAX_LENGTH == JUSTIFICATION_MAX_LENGTH
    assert DecisionSerializer().fields["decision_note"].max_length == DECISION_NOTE_MAX_LENGTH


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            with_flag(QUOTA, "--justification", "x" * (JUSTIFICATION_MAX_LENGTH + 1)),
            "--justification: at most 4,000 characters, not 4,001",
        ),
        (
            ("approve", "12", "--reason", "x" * 12_345),
            "--reason: at most 10,000 characters, not 12,345",
        ),
    ],
)
@pytest.mark.usefixtures("nowhere")
def test_a_text_too_long_is_refused_in_the_servers_words(
    argv: tuple[str, ...], said: str, capsys: Any
) -> None:
    status, out, err = run(*argv)
    assert status == 2 and out == ""
    assert said in err + capsys.readouterr().err
