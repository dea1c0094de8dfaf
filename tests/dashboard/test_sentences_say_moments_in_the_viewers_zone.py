"""The core says a moment in its sentences in UTC ("which has starved since 2025-12-06 05:46
UTC", "one priority step lower until ..."), while the pages say every other moment in the
viewer's zone: a workload page in Paris read "starved since 05:46 UTC" beside "not before
19:11 UTC+1". The readers say the core's moments again in the reader's zone
(``workloads.queries.moments_in``, through ``sentence``): the pages in the viewer's, the API,
the CLI and the pods' Events in UTC, as before."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

import pytest
from dashboard_pages import text
from domain_builders import explained
from two_teams import STARVING_FOR_VISION, Pool, submit

from gpupool.scheduler.explain import Verdict, explanation
from gpupool.workloads.queries import moments_in

pytestmark = pytest.mark.django_db

PARIS = ZoneInfo("Europe/Paris")
# Back-off until 2025-12-06 06:46:40 UTC: 07:46 in Paris (UTC+1 in December).
BACKED_OFF = {
    "queue": "nlp",
    "flavor": "h100",
    "backoff": {
        "caused_by": "workload",
        "preemptions": 3,
        "window_s": 3600,
        "until": 1_765_003_600,
    },
}


def core_words(reason: str, facts: dict[str, Any]) -> str:
    """The sentence the core writes for the verdict (what a cycle stores)."""
    return explanation("", Verdict(reason, facts), 1).detail  # type: ignore[arg-type]


def waiting(pool: Pool) -> tuple[Any, Any]:
    """nlp's two waiting workloads: one behind work held for vision's starving one (its
    sentence says its position: said again by the readers), one backed off (its sentence
    as written: no position in it)."""
    behind = submit(pool, "behind", pool.nlp_queue, "lena")
    explained(behind, "behind", core_words("behind", STARVING_FOR_VISION), STARVING_FOR_VISION, 1.0)
    backed = submit(pool, "backed", pool.nlp_queue, "lena")
    explained(backed, "quota", core_words("quota", BACKED_OFF), BACKED_OFF, 2.0)
    return behind, backed


def test_the_pages_say_the_cores_moments_in_the_viewers_zone(pool: Pool, page_as: Any) -> None:
    behind, backed = waiting(pool)
    assert "2025-12-06 05:46 UTC" in behind.explanation.detail  # as the core wrote it
    assert "until 2025-12-06 06:46 UTC" in backed.explanation.detail
    client = page_as("lena")
    client.cookies["gpupool_tz"] = "Europe/Paris"
    for page, said in (
        ("/workloads/nlp/behind/", "which has starved since 2025-12-06 06:46 UTC+1"),
        ("/workloads/nlp/backed/", "one priority step lower until 2025-12-06 07:46 UTC+1"),
        ("/workloads/", "which has starved since 2025-12-06 06:46 UTC+1"),
        ("/workloads/", "one priority step lower until 2025-12-06 07:46 UTC+1"),
    ):
        shown = text(client.get(page))
        assert said in shown, page
        assert "05:46 UTC" not in shown and "06:46 UTC " not in shown, page


def test_the_api_says_them_in_utc_as_before(pool: Pool, page_as: Any) -> None:
    waiting(pool)
    client = page_as("lena")
    client.cookies["gpupool_tz"] = "Europe/Paris"  # a page's setting: the API keeps UTC
    for name, said in (
        ("behind", "which has starved since 2025-12-06 05:46 UTC:"),
        ("backed", "one priority step lower until 2025-12-06 06:46 UTC."),
    ):
        body = client.get(f"/api/v1/workloads/nlp/{name}/").json()
        assert said in body["explanation"]["detail"]
        assert said in body["explanation"]["summary"]


def test_only_the_cores_moments_move() -> None:
    # a value repeated as written (quoted), and a moment already in a zone, stay as they are
    quoted = 'gpupool.io/last-checkpoint: "2026-01-01 10:00 UTC" is not an RFC 3339 time'
    assert moments_in(quoted, PARIS) == quoted
    zoned = "not before 2026-01-01 11:00 UTC+1"
    assert moments_in(zoned, PARIS) == zoned
    assert moments_in("until 2026-07-01 10:00 UTC.", PARIS) == "until 2026-07-01 12:00 UTC+2."
    assert moments_in("until 2026-07-01 10:00 UTC.", ZoneInfo("UTC")) == (
        "until 2026-07-01 10:00 UTC."
    )
