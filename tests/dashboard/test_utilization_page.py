"""The Utilisation page: GPUs allocated against active per pool and team, who holds GPUs idle
(workload names to admins, finance and their own team, owners to all but finance; every team
at queue level), its
live part, its empty state, its CSV links, and the workload page's sparkline.

The pool (conftest): nlp (lead lena, member max) and vision (lead vera, member vic). For the
last two hours nlp's ``wl-alpha`` (4 GPUs, submitted by max) worked half the time, and vision's
``wl-beta`` (2 GPUs, submitted by vic) sat idle: in the last 24 hours nlp was allocated 8
GPU-h, 4 active and 4 idle; vision 4 GPU-h, all idle.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from dashboard_pages import BY_ROLE, live, text
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from gpupool.accounting.actions import do_close_usage, do_open_usage
from gpupool.utilization.models import ActivityWindow
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

URL = "/utilization/"


def running(pool: Any, name: str, queue: Any, gpus: int, by: str, busy: float) -> Any:
    """A workload holding ``gpus`` h100 GPUs for the last two hours, the source seeing it
    work the fraction ``busy`` of each 10-minute window (its usage ends now)."""
    now = timezone.now()
    workload = do_submit_workload(name, queue=queue, pod_sets=[PodSetSpec(1, gpus=gpus,
        flavor=pool.h100)], submitter=pool.users[by], at=now - timedelta(hours=3))  # fmt: skip
    do_open_usage(workload, flavor=pool.h100, gpus=gpus, at=now - timedelta(hours=2))
    do_close_usage(workload, at=now)  # so that the figures do not grow while the test runs
    for step in range(12):
        start = now - timedelta(hours=2) + step * timedelta(minutes=10)
        held = gpus * 600.0
        ActivityWindow.objects.create(
            workload=workload, tenant=queue.tenant, queue=queue, started_at=start,
            ended_at=start + timedelta(minutes=10), gpus=gpus, observed_gpu_seconds=held,
            active_gpu_seconds=held * busy, mean_utilization=60.0 * busy,
            last_active_at=start + timedelta(minutes=10) if busy else None,
        )  # fmt: skip
    return workload


@pytest.fixture
def used(pool: Any) -> Any:
    running(pool, "wl-alpha", pool.nlp_queue, 4, "max", busy=0.5)
    running(pool, "wl-beta", pool.vision_queue, 2, "vic", busy=0.0)
    return pool


def test_an_admin_sees_every_team_and_the_idle_workloads_with_their_owners(
    used: Any, page_as: Any
) -> None:
    page = text(page_as("ada").get(URL))

    teams = page.split('id="utilization-teams"')[1].split("</table>")[0]
    assert 'data-tenant="nlp"' in teams and 'data-tenant="vision"' in teams
    assert "8 GPU-h" in teams and "4 GPU-h" in teams
    wasters = page.split('id="utilization-wasters"')[1].split("</table>")[0]
    assert "nlp/wl-alpha" in wasters and "vision/wl-beta" in wasters  # 4 idle GPU-h each
    assert "<td>vic</td>" in wasters and "<td>max</td>" in wasters
    assert 'href="/workloads/vision/wl-beta/"' in wasters
    assert 'id="pool-chart-figure"' in page and 'id="team-chart-figure"' in page
    assert 'id="csv-teams"' in page and 'id="csv-wasters"' in page


def test_finance_sees_every_team_and_the_idle_workloads_without_owners(
    used: Any, page_as: Any
) -> None:
    page = text(page_as("fin").get(URL))

    assert 'data-tenant="nlp"' in page and 'data-tenant="vision"' in page
    # every team's idle workloads by name, as the per-workload cost report gives them
    # (until 2026-12-07 none), but not who submitted them
    wasters = page.split('id="utilization-wasters"')[1].split("</table>")[0]
    assert "nlp/wl-alpha" in wasters and "vision/wl-beta" in wasters
    assert "<td>vic</td>" not in wasters and "<td>max</td>" not in wasters
    queues = page.split('id="utilization-queues"')[1].split("</table>")[0]
    assert "<td>vision</td>" in queues and "<td>nlp</td>" in queues
    assert 'id="csv-wasters"' in page


@pytest.mark.parametrize("name", ["lena", "max"])
def test_a_lead_or_member_sees_their_teams_workloads_and_other_teams_at_queue_level(
    used: Any, page_as: Any, name: str
) -> None:
    page = text(page_as(name).get(URL))

    teams = page.split('id="utilization-teams"')[1].split("</table>")[0]
    assert 'data-tenant="nlp"' in teams and 'data-tenant="vision"' not in teams
    wasters = page.split('id="utilization-wasters"')[1].split("</table>")[0]
    assert "nlp/wl-alpha" in wasters
    assert "wl-beta" not in page and "<td>vic</td>" not in page
    queues = page.split('id="utilization-queues"')[1].split("</table>")[0]
    assert "<td>vision</td>" in queues


def test_every_role_opens_the_page_and_the_navigation_offers_it(used: Any, page_as: Any) -> None:
    for role, name in BY_ROLE.items():
        answer = page_as(name).get(URL)
        assert answer.status_code == 200, role
        assert f'href="{URL}"' in text(answer), role
    assert page_as("nobody").get(URL).status_code == 403


def test_the_live_part_refreshes_alone(used: Any, page_as: Any) -> None:
    part = text(live(page_as("ada"), URL + "?window=6h"))

    assert "<html" not in part and 'id="utilization-teams"' in part
    assert "last 6h" in part


def test_an_empty_pool_says_what_the_page_will_show(pool: Any, page_as: Any) -> None:
    page = text(page_as("lena").get(URL))

    assert 'id="utilization-empty"' in page


def test_the_page_reads_a_bounded_number_of_queries_whatever_the_windows(
    used: Any, page_as: Any
) -> None:
    client = page_as("ada")
    client.get(URL)  # the session and the first reads of the cache
    with CaptureQueriesContext(connection) as few:
        client.get(URL)
    running(used, "more", used.nlp_queue, 1, "lena", busy=1.0)
    running(used, "again", used.vision_queue, 1, "vera", busy=0.2)
    with CaptureQueriesContext(connection) as more:
        client.get(URL)

    assert len(more) == len(few)


def test_a_workloads_page_draws_its_utilisation_sparkline(used: Any, page_as: Any) -> None:
    page = text(page_as("max").get("/workloads/nlp/wl-alpha/"))

    assert 'id="sparkline-chart-figure"' in page
    assert "30.0" in page.split('id="sparkline-chart-figure"')[1].split("</script>")[0]


def test_the_team_and_queue_tables_count_idle_alike_when_the_source_missed_time(
    pool: Any, page_as: Any
) -> None:
    """vision's 2-GPU ``wl-gap`` was held for two hours, but the source observed only its last
    hour (idle): the team's idle and its queue's are both 4 GPU-h, 2 of them unobserved. The
    queue table used to count only the observed hour (2 against the team's 4)."""
    workload = running(pool, "wl-gap", pool.vision_queue, 2, "vic", busy=0.0)
    ActivityWindow.objects.filter(
        workload=workload, started_at__lt=timezone.now() - timedelta(minutes=61)
    ).delete()

    page = text(page_as("ada").get(URL))

    teams = page.split('id="utilization-teams"')[1].split("</table>")[0]
    vision = teams.split('data-tenant="vision"')[1].split("</tr>")[0]
    assert 'data-column="idle_gpu_hours">4 GPU-h' in vision
    assert 'data-column="unobserved_gpu_hours">2 GPU-h' in vision
    queues = page.split('id="utilization-queues"')[1].split("</table>")[0]
    row = queues.partition("<td>vision</td>")[2].split("</tr>")[0]
    assert [cell.split("<")[0] for cell in row.split('class="number">')[1:]] == [
        "4 GPU-h", "4 GPU-h", "2 GPU-h"]  # fmt: skip


def test_finance_gets_no_owner_column_rather_than_a_dash_on_every_row(
    used: Any, page_as: Any
) -> None:
    # (Walk s23: finance's list had an Owner column of dashes on every row, as if no workload
    # had a submitter; finance is not told them, so the column is not there.)
    wasters = text(page_as("fin").get(URL)).split('id="utilization-wasters"')[1]
    head, body = wasters.split("</thead>")[0], wasters.split("</table>")[0]
    assert '<th scope="col">Owner</th>' not in head and "<td>\u2013</td>" not in body
    admins = text(page_as("ada").get(URL)).split('id="utilization-wasters"')[1]
    assert '<th scope="col">Owner</th>' in admins.split("</thead>")[0]
