"""The command-line client's words for requests and submissions, against a stand-in for the
API (what the client sends, what it prints):

- a request's kind is the API's word (``queue-quota``, ``budget``) in ``--kind`` and in the
  KIND column; ``request quota`` is only the command that files one;
- ``submit`` prints the API's warning for work that could never run as asked in the words
  ``dry-run`` prints;
- a budget request's period reads with its last day included (the API's ``summary``).
"""

from __future__ import annotations

import io
from datetime import date, timedelta
from typing import Any

import pytest
from domain_builders import period_fields

# The live server's pool and the client run as one of its users (``pool``, ``as_user``).
from test_client_requests import as_user, budget, pool  # noqa: F401

from gpupool.client.http import Listing
from gpupool.client.main import do_dry_run, do_requests, do_submit, parser

NEVER = "It can never run as asked: queue nlp can never hold 84 h100 GPUs (capability 16)."


class StandIn:
    """Answers the client's calls with fixed bodies and remembers what it was asked."""

    def __init__(self, answer: Any) -> None:
        self.answer, self.asked = answer, []  # type: list[Any]

    def every(self, path: str, query: dict[str, Any]) -> Listing:
        self.asked.append((path, query))
        return Listing(rows=self.answer, count=len(self.answer), capped=False)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        self.asked.append((method, path, body))
        return self.answer


def run(api: StandIn, command: Any, *argv: str) -> str:
    out = io.StringIO()
    options = parser().parse_args(list(argv))
    options.command = []  # what ``main`` takes from after ``--``: nothing here
    command(api, options, out)
    return out.getvalue()


ROW = {"id": 5, "kind": "queue-quota", "state": "submitted", "tenant": "nlp",
       "requested_by": "lena", "submitted_at": None,
       "summary": "queue nlp h100: guarantee 8, deserved 12, capability 24"}  # fmt: skip


def test_requests_name_the_kind_as_the_api_does() -> None:
    api = StandIn([ROW])
    out = run(api, do_requests, "requests", "--kind", "queue-quota")
    assert api.asked == [("quota-requests/", {"kind": "queue-quota"})]
    header, row = out.splitlines()
    assert header.split()[:2] == ["REQUEST", "KIND"] and row.split()[:3] == [
        "#5",
        "queue-quota",
        "submitted",
    ]


def test_the_client_s_own_word_for_the_kind_is_a_usage_error(capsys: Any) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["requests", "--kind", "quota"])
    assert "--kind" in capsys.readouterr().err


def test_submit_warns_in_dry_run_s_words_when_it_could_never_run() -> None:
    made = {"namespace": "nlp", "name": "huge", "queue": "nlp", "gpus": "168.000",
            "priority_class": "normal", "warning": NEVER,
            "explanation": {"summary": "Waiting for the next scheduling cycle."}}  # fmt: skip
    flags = ("--name", "huge", "--queue", "nlp", "--gpus", "8", "--count", "21",
             "--flavor", "h100", "--image", "x")  # fmt: skip
    out = run(StandIn(made), do_submit, "submit", *flags)
    dry = {"cycle_id": 1, "snapshot_at": "2026-12-06T20:00:00Z", "layers": [], "fits": False,
           "never_fits": NEVER, "first_failure": "quota"}  # fmt: skip
    dry_line = run(StandIn(dry), do_dry_run, "dry-run", *flags).splitlines()[-1]
    assert dry_line == "It could never run as asked: queue nlp can never hold 84 h100 GPUs " + (
        "(capability 16)."
    )
    assert f"Warning: {dry_line}" in out
    without = run(StandIn(made | {"warning": ""}), do_submit, "submit", *flags)
    assert "Warning" not in without and "never" not in without


@pytest.mark.django_db(transaction=True)
def test_a_budget_request_s_period_reads_with_its_last_day_included(
    as_user: Any,  # noqa: F811 (the fixture imported above)
) -> None:
    """Filed for December (``--period-end 2027-01-01``, the first day after it), it reads
    "2026-12-01 to 2026-12-31 (included)" as the Cost page's "End (included)" would, in
    what the client prints on filing and listing."""
    start, end = (
        date.fromisoformat(period_fields()["period_start"]),
        date.fromisoformat(period_fields()["period_end"]),
    )
    shown = f"{start:%Y-%m-%d} to {end - timedelta(days=1):%Y-%m-%d} (included)"
    status, out, err = as_user("lena", *budget(), "--draft")
    assert status == 0, err
    assert f"budget of nlp at high, {shown}: 40 GPU-hours more." in out
    status, out, err = as_user("lena", "requests")
    assert status == 0, err
    assert shown in out and f"to {end:%Y-%m-%d}" not in out
