"""What a walk-through of the pages in Chromium found: the scheduler's numbers in the pages'
words and formats, one format for times on the server and in the browser, the Overview's
pending chart with its table, a preemption's two moments told apart, and wording."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from dashboard_pages import SUBMIT_FORM, live, text
from django.conf import settings
from django.utils import dateformat, timezone
from domain_builders import explained, flavor, node, quota, this_month
from two_teams import budget_request, submit

from gpupool.accounting.actions import do_record_preemption
from gpupool.audit.actions import record_audit_event
from gpupool.control.queries import SnapshotError
from gpupool.dashboard import charts, views
from gpupool.dashboard.facts import FACTS, fact_rows
from gpupool.quotas.actions import (
    BudgetMove,
    do_grant_budget,
    do_record_budget_moves,
)
from gpupool.quotas.whatif import replay_progress
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

BERLIN_COOKIE = "Europe%2FBerlin"

# What the walk-through saw on a workload that never fits: the loop's facts as written.
NEVER_FITS_FACTS = {
    "queue": "nlp",
    "flavor": "h100",
    "free_gpus": 112.0,
    "estimate_not_before": "2026-12-06T14:57:49.122474+00:00",
    "asked_gpus": 240.0,
    "available_gpus": 16.0,
    "borrowing_capped": True,
    "never_fits": True,
}


# ----------------------------------------------------------------------------- 1 the facts


def test_the_schedulers_numbers_read_with_labels_units_the_viewers_zone_and_yes_no(
    pool: Any, page_as: Any
) -> None:
    workload = submit(pool, "huge", pool.nlp_queue, "max")
    explained(workload, "quota", "Queue nlp can never hold 240 h100 GPUs.", NEVER_FITS_FACTS)
    client = page_as("max")
    client.cookies["gpupool_tz"] = BERLIN_COOKIE
    page = text(live(client, "/workloads/nlp/huge/"))
    numbers = page.split("<details data-facts>", 1)[1].split("</details>", 1)[0]
    row = '<tr data-fact="{}"><th scope="row">{}</th><td>{}</td></tr>'
    assert row.format("free_gpus", "GPUs free", "112 GPUs") in numbers
    assert row.format("asked_gpus", "GPUs asked", "240 GPUs") in numbers
    assert row.format("borrowing_capped", "borrowing capped by its capability", "yes") in numbers
    assert row.format("never_fits", "never fits as asked", "yes") in numbers
    assert ">2026-12-06 15:57 UTC+1</time>" in numbers  # estimate_not_before, in Berlin
    for raw in ("112.0", "True", "2026-12-06T14:57:49.122474+00:00</td>", "free_gpus</th>"):
        assert raw not in numbers
    assert "explanation.facts" in numbers  # where the raw facts are: the API


def test_every_fact_is_labelled_once_and_nested_or_unknown_facts_still_read() -> None:
    assert len({fact.label for fact in FACTS.values()}) == len(FACTS)  # one label, one fact
    rows = {
        row.key: row
        for row in fact_rows(
            {
                "remaining_gpu_hours": 0.126,
                "then": "behind",
                "then_facts": {"resource": "quota", "asked": 4.0, "free": 0.0, "queue": "search"},
                "expected_runtime_s": 5400,
                "something_new": 3,
            }
        )
    }
    assert rows["remaining_gpu_hours"].value == "0.13 GPU-h"
    nested = "queue search; what runs short quota; asked 4 GPUs; free 0 GPUs"
    assert rows["then_facts"].value == nested
    assert rows["expected_runtime_s"].value == "1 h 30 min"
    assert (rows["something_new"].label, rows["something_new"].value) == ("something_new", "3")
    cpu = {row.key: row.value for row in fact_rows({"resource": "cpu", "asked": 64, "free": 12.5})}
    assert cpu["asked"] == "64 CPU cores" and cpu["free"] == "12.5 CPU cores"


# ----------------------------------------------------------------------------- 2 times


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run time.js")
def test_the_browser_writes_times_as_the_server_does_in_the_zones_current_name() -> None:
    script = (Path(settings.BASE_DIR) / "frontend" / "js" / "time.js").read_text()
    harness = """
    const vm = require("vm");
    const elements = [
      {attrs: {"datetime": "2026-12-06T13:48:00+00:00", "data-local": "datetime"}, textContent: ""},
      {attrs: {"datetime": "2026-11-30T20:00:00+00:00", "data-local": "date"}, textContent: ""},
    ];
    elements.forEach(e => { e.getAttribute = name => e.attrs[name]; });
    const zoneSpan = {textContent: ""};
    let ready = null;
    const document = {
      cookie: "",
      querySelectorAll: sel => sel.startsWith("time") ? elements : [zoneSpan],
      getElementById: () => null,
      addEventListener: (name, f) => { if (name === "DOMContentLoaded") ready = f; },
    };
    vm.runInNewContext(process.argv[1], {document, Intl, Date, encodeURIComponent, isNaN});
    ready();
    console.log(JSON.stringify({
      times: elements.map(e => e.textContent), zone: zoneSpan.textContent, cookie: document.cookie,
    }));
    """
    out = subprocess.run(
        ["node", "-e", harness, script],
        capture_output=True,
        text=True,
        check=True,
        env={"TZ": "Asia/Kolkata", "PATH": "/usr/bin:/bin"},
    )
    shown = json.loads(out.stdout)
    # the server's format (templatetags.dashboard.local_time), in the browser's zone
    assert shown["times"] == ["2026-12-06 19:18 UTC+5:30", "2026-12-01"]
    assert shown["zone"] == "Asia/Kolkata"  # not the old alias Asia/Calcutta
    assert shown["cookie"].startswith("gpupool_tz=Asia%2FKolkata;")


def test_a_budgets_period_is_written_in_the_pages_date_format(pool: Any, page_as: Any) -> None:
    start, end = this_month()
    request = budget_request(pool, "50", period=(start, end), justification="deadline", submit=True)
    page = text(page_as("ada").get(f"/approvals/{request.pk}/"))
    assert f"{start:%Y-%m-%d} to {end - timedelta(days=1):%Y-%m-%d} (included)" in page
    assert dateformat.format(start, "N j, Y") not in page  # Django's own date format


# ----------------------------------------------------------------------------- 3 overview


def test_the_pending_reasons_chart_has_a_table_and_a_margin_that_fits_its_reasons(
    pool: Any, page_as: Any
) -> None:
    explained(submit(pool, "a", pool.nlp_queue, "max"), "waiting-for-preemption", "leaving")
    explained(submit(pool, "b", pool.nlp_queue, "max"), "quota", "no quota")
    explained(submit(pool, "c", pool.vision_queue, "vic"), "quota", "no quota")
    page = text(live(page_as("ada"), "/overview/"))
    table = page.split("<table data-pending-reasons>", 1)[1].split("</table>", 1)[0]
    cell = '<tr><td>{}</td><td class="number">{}</td></tr>'
    assert cell.format("quota", 2) + cell.format("waiting-for-preemption", 1) in table
    figure = charts.pending_reasons_figure({"waiting-for-preemption": 1})
    assert figure["layout"]["yaxis"]["automargin"] is True


# ----------------------------------------------------------------------------- 4 preemption


def test_a_preemptions_moment_and_the_timelines_transition_say_which_moment_each_is(
    pool: Any, page_as: Any
) -> None:
    victim = submit(pool, "victim", pool.nlp_queue, "max")
    do_record_preemption(
        victim,
        reason="reclaim",
        at=timezone.now() - timedelta(minutes=5),
        gpus_freed=8,
        lost_gpu_hours=Decimal("1"),
        preemptor=submit(pool, "other", pool.vision_queue, "vic"),
    )
    page = text(live(page_as("max"), "/workloads/nlp/victim/"))
    assert '<th scope="col">Eviction decided at</th>' in page
    assert '<th scope="col">State changed at</th>' in page
    assert "once its pods were gone" in page


# ----------------------------------------------------------------------------- 5 wording


def test_the_dry_runs_heading_says_refused_or_could_not_check_not_not_checked_yet(
    pool: Any, page_as: Any
) -> None:
    client = page_as("max")
    incomplete = text(client.post("/workloads/dry-run/", SUBMIT_FORM | {"pods": ""}))
    assert "<strong>Not checked yet:</strong>" in incomplete
    refused = text(client.post("/workloads/dry-run/", SUBMIT_FORM | {"gpu_milli": "250"}))
    assert "<strong>Refused:</strong>" in refused
    with mock.patch.object(views, "dry_run_submission", side_effect=SnapshotError("no class")):
        failed = text(client.post("/workloads/dry-run/", SUBMIT_FORM))
    assert "<strong>Could not check now:</strong>" in failed


def test_submitting_work_that_never_fits_says_it_will_not_run_as_asked(
    pool: Any, page_as: Any
) -> None:
    client = page_as("max")
    huge = SUBMIT_FORM | {"name": "huge", "pods": "4", "gpus_per_pod": "8"}  # 32 > capability 16
    page = text(client.post("/workloads/submit/", huge, follow=True))
    assert "nlp/huge will not run as asked:" in page  # a warning, beside "nlp/huge is queued."
    assert "places it" not in page
    fits = text(client.post("/workloads/submit/", SUBMIT_FORM, follow=True))
    assert "nlp/train is queued: the next scheduling cycle starts it or says here" in fits


def test_a_shared_jobs_pods_read_as_pods_times_their_share(pool: Any, page_as: Any) -> None:
    l40s = flavor("l40s-shared", sharing="shared", gpu_memory_gb=48)
    node("s1", l40s, gpus=4)
    quota(pool.nlp_queue, l40s, "0.5", 1, 1)
    do_submit_workload(
        "notebook",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=2, gpus=1, gpu_milli=300, flavor=l40s)],
        submitter=pool.users["max"],
    )
    page = text(live(page_as("max"), "/workloads/nlp/notebook/"))
    assert "<span data-pod-set>2 pods \u00d7 0.3 GPUs of l40s-shared</span>" in page
    assert "2 \u00d7 1" not in page


def test_a_drafted_request_is_a_draft(pool: Any, page_as: Any) -> None:
    form = {
        "kind": "queue-quota",
        "queue": pool.nlp_queue.pk,
        "flavor": pool.h100.pk,
        "guarantee": "6",
        "deserved": "10",
        "capability": "16",
        "justification": "more",
        "save_draft": "1",
    }
    page = text(page_as("lena").post("/requests/", form, follow=True))
    assert " is a draft: " in page and " is draft:" not in page


def test_the_audit_counts_one_change_and_one_movement_in_the_singular(
    pool: Any, page_as: Any
) -> None:
    record_audit_event(
        acting_user=pool.users["ada"], action="tenancy.save", instance=pool.nlp, before={}, after={}
    )
    page = text(page_as("ada").get("/audit/?actor=ada"))
    assert "1 change matches" in page
    budget = do_grant_budget(
        pool.nlp,
        pool.high,
        period_start=date(2026, 11, 1),
        period_end=date(2026, 12, 1),
        gpu_hours=10,
        acting_user=pool.users["ada"],
        at=datetime.fromisoformat("2026-11-29T10:00:00+00:00"),
    )
    do_record_budget_moves(
        [BudgetMove(budget.pk, "spend", Decimal("-1"), None, "ran")],
        at=datetime.fromisoformat("2026-11-29T11:00:00+00:00"),
    )
    from gpupool.audit.models import AuditEvent

    event = AuditEvent.objects.get(action="quotas.cycle_budget")
    assert event.reason == "1 movement of the scheduling loop"


def test_the_what_ifs_progress_says_which_replay_its_counts_are_of() -> None:
    noted: list[tuple[float, str]] = []
    note = replay_progress(lambda fraction, message: noted.append((fraction, message)))
    note("proposed", 583, 1034)
    [(fraction, message)] = noted
    assert round(fraction * 100) == 76  # of the whole run: both replays
    assert message == "replaying with the change: 583 of 1,034 workloads done (replay 2 of 2)"


def test_the_last_14_days_of_preemptions_are_14_days(pool: Any, page_as: Any) -> None:
    victim = submit(pool, "v", pool.nlp_queue, "max")
    now = views.pool_clock()
    for days_ago in (0, 13, 14):
        do_record_preemption(
            victim,
            reason="reclaim",
            at=now - timedelta(days=days_ago, minutes=1),
            gpus_freed=8,
            lost_gpu_hours=Decimal("1"),
        )
    page = text(page_as("ada").get("/preemptions/"))
    assert "Over the last 14 days" in page
    figure = json.loads(
        page.split('id="history-chart-figure" type="application/json">', 1)[1].split("</script>")[0]
    )
    days = figure["data"][0]["x"]
    today = timezone.localtime(now - timedelta(minutes=1)).date()
    assert len(days) == 14 and days[0] == (today - timedelta(days=13)).isoformat()
    assert sum(sum(trace["y"]) for trace in figure["data"]) == 2  # 14 days ago is outside
