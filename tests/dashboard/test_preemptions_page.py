"""Preemptions over time, churn per team, and the back-off and extra protection in force
(the core's own rules over the recorded preemptions)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from dashboard_pages import text
from django.utils import timezone
from two_teams import submit

from gpupool.accounting.actions import do_record_preemption
from gpupool.accounting.models import PreemptionEvent
from gpupool.dashboard import views
from gpupool.quotas.actions import do_save_queue
from gpupool.scheduler.types import BackoffPolicy, VictimProtectionPolicy
from gpupool.workloads.queries import backoffs_in_force, protections_in_force


def preempt(victim: Any, preemptor: Any, minutes_ago: float, lost: str = "1") -> None:
    """A recorded reclaim of ``victim`` for ``preemptor``."""
    do_record_preemption(
        victim,
        reason="reclaim",
        at=timezone.now() - timedelta(minutes=minutes_ago),
        gpus_freed=8,
        lost_gpu_hours=Decimal(lost),
        preemptor=preemptor,
    )


def test_a_team_that_caused_too_many_preemptions_is_backed_off(pool: Any) -> None:
    preemptor = submit(pool, "greedy", pool.nlp_queue, "max")
    for index in range(4):
        preempt(submit(pool, f"v{index}", pool.vision_queue, "vic"), preemptor, 10 - index)
    policy = BackoffPolicy(max_preemptions=3, window_s=3600, cooldown_s=1800)
    [backoff] = backoffs_in_force(timezone.now(), policy)
    assert (backoff.tenant, backoff.caused) == ("nlp", 4)
    assert timedelta(minutes=22) < backoff.ends_at - timezone.now() <= timedelta(minutes=30)
    assert backoffs_in_force(timezone.now() + timedelta(hours=1), policy) == []


def test_a_workload_evicted_often_earns_extra_protection(pool: Any) -> None:
    victim = submit(pool, "sweep", pool.vision_queue, "vic")
    preemptor = submit(pool, "run", pool.nlp_queue, "max")
    preempt(victim, preemptor, 50)
    preempt(victim, preemptor, 20)
    policy = VictimProtectionPolicy(evictions=2, window_s=3600, protected_s=1800)
    [found] = protections_in_force(PreemptionEvent.objects.all(), timezone.now(), policy)
    assert (found.workload.name, found.evictions, found.protected_s) == ("sweep", 2, 1800)


def test_the_page_draws_the_history_churn_and_what_is_in_force(pool: Any, page_as: Any) -> None:
    victim = submit(pool, "sweep", pool.vision_queue, "vic")
    preemptor = submit(pool, "secret-run", pool.nlp_queue, "max")
    preempt(victim, preemptor, 50, lost="1.5")
    preempt(victim, preemptor, 20, lost="1")
    page = text(page_as("vic").get("/preemptions/"))
    assert 'id="history-chart-figure"' in page and '"reclaim"' in page
    assert "Churn per team" in page and "2.5 GPU-h" in page
    assert "No team is backed off now" in page
    assert "No work of your teams has earned extra protection now" in page
    assert "No workload has earned" in text(page_as("ada").get("/preemptions/"))
    assert 'href="/workloads/vision/sweep/"' in page
    assert "secret-run" not in page


def test_queues_of_the_same_protection_share_a_row_that_names_them(
    pool: Any, page_as: Any, monkeypatch: Any
) -> None:
    nlp = pool.nlp_queue
    nlp.default_protected_runtime_s, nlp.max_protected_runtime_s = 1800, 7200
    do_save_queue(nlp, acting_user=None)
    page = text(page_as("max").get("/preemptions/"))
    rows = page.split("<tr data-protection>")[1:]
    assert len(rows) == 2
    assert rows[0].startswith("<td>nlp</td>") and "30 min" in rows[0] and "2 h" in rows[0]
    assert rows[1].startswith("<td>vision</td>") and "no cap" in rows[1]
    monkeypatch.setattr(views, "PROTECTION_NAMES_SHOWN", 0)  # more queues than it names
    folded = text(page_as("max").get("/preemptions/")).split("<tr data-protection>")[1]
    assert folded.startswith("<td><details><summary>1 queue</summary>nlp</details></td>")


def test_the_page_links_the_whole_history_as_the_apis_csv_scoped_as_the_page(
    pool: Any, page_as: Any
) -> None:
    """The page shows the newest events; its link downloads every one the viewer may see."""
    victim = submit(pool, "sweep", pool.vision_queue, "vic")
    preemptor = submit(pool, "secret-run", pool.nlp_queue, "max")
    preempt(victim, preemptor, 20, lost="1.5")
    client = page_as("vic")
    page = text(client.get("/preemptions/"))
    link = page.split('id="csv-preemptions" href="')[1].split('"')[0]
    assert link == "/api/v1/preemptions/?format=csv"
    answer = client.get(link)
    lines = b"".join(answer.streaming_content).decode().splitlines()
    assert lines[0].startswith("id,at,reason,victim,victim_queue,victim_tenant,preemptor,")
    [row] = lines[1:]
    assert ",vision/sweep," in row and ",1.5000," in row and "secret-run" not in row


def test_an_idle_reclaim_is_for_no_workload_without_repeating_why(pool: Any, page_as: Any) -> None:
    """An idle reclaim has no preemptor: the "For" column says its GPUs went back to the
    pool, and leaves the reason to the "Why" column (it read "no workload: idle (...)")."""
    do_record_preemption(
        submit(pool, "notebook", pool.nlp_queue, "max"),
        reason="idle",
        at=timezone.now(),
        gpus_freed=8,
        lost_gpu_hours=Decimal(0),
    )
    page = text(page_as("max").get("/preemptions/"))
    assert "no workload: its GPUs went back to the pool" in page
    assert page.count("its GPUs sat idle past its idle timeout") == 1  # the Why column only
