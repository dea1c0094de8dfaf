"""The core's sentences say a time as people read one, as the pages and the CLI write it in
UTC: "2026-12-08 15:03 UTC". A walk of the product read a back-off sentence ending "... until
2026-12-08T15:03:03.470651Z" (POSIX seconds written as ISO 8601, to the microsecond) beside a
page that said "until 2026-12-08 15:03 UTC". Every time a sentence gives -- a back-off's end,
since when a holder starves, until when lent quota's borrowers are protected -- goes through
one formatter (``explain.when``); the facts keep their POSIX seconds as they were."""

from __future__ import annotations

import re

import pytest

from gpupool.scheduler.explain import Verdict, explanation, when

# The walk's back-off end: 2026-12-08 15:03:03.470651 UTC.
UNTIL = 1796742183.470651
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def test_a_time_reads_as_the_pages_and_the_cli_write_it() -> None:
    assert when(UNTIL) == "2026-12-08 15:03 UTC"
    assert when(1796741536.034) == "2026-12-08 14:52 UTC"  # the CLI's own example
    assert when(0) == "1970-01-01 00:00 UTC"
    for missing in (None, "2026-12-08T15:03:03Z", True, float("inf"), float("nan"), 1e20):
        assert when(missing) == "?", missing


def test_the_back_off_sentence_says_its_end_as_people_read_it_and_the_facts_keep_seconds() -> None:
    backoff = {"caused_by": "tenant", "preemptions": 11, "window_s": 3600.0, "until": UNTIL}
    said = explanation("w", Verdict("behind", {"queue": "nlp", "backoff": backoff}), 3)
    assert said.detail.endswith(
        " Its tenant caused 11 preemptions in the last 1 h: it competes one priority step "
        "lower until 2026-12-08 15:03 UTC."
    ), said.detail
    assert said.facts["backoff"] == backoff  # the facts: POSIX seconds, as they were
    assert not ISO.search(said.detail), said.detail


@pytest.mark.parametrize(
    ("facts", "said"),
    [
        (
            {"queue": "nlp", "held_for": "big", "starving_since": UNTIL},
            "Capacity is held for big, which has starved since 2026-12-08 15:03 UTC: position 3.",
        ),
        (
            {
                "queue": "nlp",
                "lent_gpus": 8.0,
                "lent_flavor": "h100",
                "lent_to": ["cv"],
                "cannot_reclaim": "protected",
                "reclaimable_at": UNTIL,
            },
            "Its queue lent 8 GPUs of its share to cv that cannot be taken back now: their "
            "work is protected until 2026-12-08 15:03 UTC.",
        ),
        (
            {
                "tenant": "nlp",
                "priority_class": "high",
                "remaining_gpu_hours": 0.0,
                "reservation_gpu_hours": 2.0,
                "then": "behind",
                "then_facts": {
                    "queue": "nlp",
                    "backoff": {"caused_by": "workload", "preemptions": 4, "until": UNTIL},
                },
            },
            "it competes one priority step lower until 2026-12-08 15:03 UTC.",
        ),
    ],
    ids=["starving-since", "protected-until", "budget-then-back-off"],
)
def test_every_time_a_sentence_gives_reads_as_people_read_it(
    facts: dict[str, object], said: str
) -> None:
    reason = "budget" if "then" in facts else "behind"
    detail = explanation("w", Verdict(reason, facts), 3).detail
    assert said in detail, detail
    assert not ISO.search(detail), detail
