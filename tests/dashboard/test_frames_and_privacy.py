"""The pages whose data comes in the second wave show what exists and say what is coming;
tenants see each other only at the queue level."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from dashboard_pages import live, rows, text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from domain_builders import explained, user
from two_teams import submit

from gpupool.accounting.actions import do_record_preemption
from gpupool.control.models import SchedulingCycle


def test_members_see_their_teams_workloads_and_never_another_teams_names(
    pool: Any, page_as: Any
) -> None:
    submit(pool, "nlp-train", pool.nlp_queue, "max")
    submit(pool, "vision-secret", pool.vision_queue, "vic")
    for name in ("max", "lena"):
        page = text(page_as(name).get("/workloads/"))
        assert "nlp/nlp-train" in page
        assert "vision-secret" not in page and ">vic<" not in page
    admin = text(page_as("ada").get("/workloads/"))
    assert "nlp/nlp-train" in admin and "vision/vision-secret" in admin


def test_the_workloads_list_filters_by_state_and_refreshes_alone(pool: Any, page_as: Any) -> None:
    submit(pool, "nlp-train", pool.nlp_queue, "max")
    client = page_as("max")
    assert "nlp/nlp-train" in text(live(client, "/workloads/?state=pending"))
    running = text(live(client, "/workloads/?state=running"))
    assert "<html" not in running and "No workloads in state “running”" in running
    assert "not looked at by a cycle yet" in text(client.get("/workloads/"))


def test_the_workloads_list_links_every_workload_in_its_state_as_the_apis_csv(
    pool: Any, page_as: Any
) -> None:
    """The page shows the newest; its link downloads all of them, its state filter kept, as
    the viewer's scope allows."""
    submit(pool, "nlp-train", pool.nlp_queue, "max")
    submit(pool, "vision-secret", pool.vision_queue, "vic")
    client = page_as("max")
    page = text(client.get("/workloads/?state=pending"))
    link = page.split('id="csv-workloads" href="')[1].split('"')[0].replace("&amp;", "&")
    assert link == "/api/v1/workloads/?format=csv&ordering=-submitted_at&state=pending"
    lines = b"".join(client.get(link).streaming_content).decode().splitlines()
    assert lines[0].startswith("namespace,name,queue,tenant,")
    assert [line.split(",")[:2] for line in lines[1:]] == [["nlp", "nlp-train"]]
    everything = text(client.get("/workloads/"))
    assert 'href="/api/v1/workloads/?format=csv&amp;ordering=-submitted_at"' in everything


def test_queues_are_public_at_the_queue_level(pool: Any, page_as: Any) -> None:
    page = rows(text(page_as("vic").get("/queues/")))
    assert 'data-queue="nlp"' in page and 'data-queue="vision"' in page
    assert "your team" in page.split('data-queue="vision"', 1)[1].split("</tr>", 1)[0]
    # the fair split of 15 healthy GPUs: each team's floor of 8 is cut to 7.5
    assert "7.5 GPUs" in page


def test_the_overview_shows_capacity_and_what_is_empty(pool: Any, page_as: Any) -> None:
    client = page_as("fin")
    page = text(client.get("/overview/"))
    assert "15 GPUs" in page and "2 nodes" in page
    assert "No scheduling cycle has run yet" in page
    assert "Nothing waits or runs now" in page
    assert "Nothing allocated in the last 24 hours" in page


def test_the_overview_lists_the_last_cycles_and_pending_work_by_reason(
    pool: Any, page_as: Any
) -> None:
    workload = submit(pool, "nlp-train", pool.nlp_queue, "max")
    explained(workload, "capacity", "needs 8, 7 free")
    now = timezone.now()
    SchedulingCycle.objects.create(
        started_at=now, finished_at=now, status="succeeded", nodes=2, workloads=1, pending=1
    )  # a record as the control loop writes it
    part = text(live(page_as("ada"), "/overview/"))
    assert "<html" not in part
    assert 'id="pending-chart-figure"' in part and '"capacity"' in part
    assert "succeeded" in part


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("/cost/", "No usage has been rolled up yet"),
        ("/preemptions/", "Priority classes"),
    ],
)
def test_frames_say_what_they_will_show(page_as: Any, url: str, says: str) -> None:
    assert says in text(page_as("ada").get(url))


def test_cost_shows_each_flavors_price_and_what_an_hour_of_it_costs(
    pool: Any, page_as: Any
) -> None:
    page = rows(text(page_as("fin").get("/cost/")))
    assert "<td>h100</td>" in page and "2.50" in page
    assert "37.50" in page  # 15 healthy GPUs at 2.50


def test_preemptions_shows_the_protection_in_force(pool: Any, page_as: Any) -> None:
    page = text(page_as("max").get("/preemptions/"))
    assert "normal" in page and "default" in page
    assert "high" in page and "1 GPU-h" in page


def test_a_pool_without_queues_says_how_queues_are_made(db: Any, client: Any) -> None:
    admin = user("root", admin=True)
    client.force_login(admin)
    assert "No queues yet" in text(client.get("/queues/"))


def test_my_workloads_reads_a_fixed_number_of_queries_whatever_the_number_of_workloads(
    pool: Any, page_as: Any
) -> None:
    submit(pool, "first", pool.nlp_queue, "max")
    client = page_as("max")
    with CaptureQueriesContext(connection) as few:
        client.get("/workloads/")
    for index in range(10):
        submit(pool, f"more-{index}", pool.nlp_queue, "lena")
    with CaptureQueriesContext(connection) as many:
        page = text(client.get("/workloads/"))
    assert "nlp/more-9" in page and "8 GPUs" in page
    assert len(many) == len(few)


def test_a_preempted_team_sees_the_preemptors_queue_and_class_but_not_its_name(
    pool: Any, page_as: Any
) -> None:
    victim = submit(pool, "vision-sweep", pool.vision_queue, "vic")
    preemptor = submit(pool, "nlp-secret-run", pool.nlp_queue, "max")
    do_record_preemption(
        victim,
        reason="reclaim",
        at=timezone.now(),
        gpus_freed=8,
        lost_gpu_hours=Decimal("1.5"),
        preemptor=preemptor,
    )
    victims = text(page_as("vic").get("/preemptions/"))
    assert "vision/vision-sweep" in victims and "queue nlp, class normal" in victims
    assert "nlp-secret-run" not in victims and ">max<" not in victims
    assert "1.5 GPU-h" in victims and "reclaim (the lending queue" in victims
    # the preemptor's own team does not see the event: it is the victim's
    assert "vision-sweep" not in text(page_as("max").get("/preemptions/"))
    admin = text(page_as("ada").get("/preemptions/"))
    assert "nlp/nlp-secret-run" in admin and "by max" in admin


def test_no_preemption_yet_says_what_will_show(pool: Any, page_as: Any) -> None:
    assert "has been preempted" in text(page_as("max").get("/preemptions/"))
