"""What the pages say agrees with itself: a pod's GPUs are a count and its devices are named
as the API names them; one way of naming the viewer's zone; one format per quantity; the
heatmap's legend counts what its cells count; the audit's reasons carry no raw moment; a draft
is drafted, not filed; and work no person submitted names what submitted it."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from dashboard_pages import live, rows, text
from django.conf import settings
from domain_builders import flavor, node, quota
from two_teams import quota_request, submit

from gpupool.audit.actions import record_audit_event
from gpupool.audit.models import AuditEvent
from gpupool.clusters.grouping import WorkloadKey
from gpupool.control.actions import do_record_cluster_sync
from gpupool.control.sync import PodSetShape, Registration, SyncDecision
from gpupool.dashboard.templatetags.dashboard import field_value, gpu_hours, gpus
from gpupool.inventory.models import Node
from gpupool.inventory.units import FlavorUnits
from gpupool.simulation.demo_submissions import SUBMITTED_BY_GENERATOR
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload
from gpupool.workloads.queries import AS_WRITTEN, summary, zone_name

BERLIN = ZoneInfo("Europe/Berlin")


def placed(
    workload: Workload, node_name: str, indices: list[int], milli: int | None = None
) -> None:
    """Admit ``workload``'s one pod onto ``indices`` of ``node_name`` (``milli`` of each)."""
    on = Node.objects.get(name=node_name)
    do_transition_workload(
        workload,
        "admitted",
        reason="test",
        placements=[PlacementSpec("main", 0, on, indices, milli)],
    )


# ----------------------------------------------------------------------------- 1 placements


def test_a_pods_gpus_are_a_count_and_its_devices_are_its_gpu_indices(
    pool: Any, page_as: Any
) -> None:
    workload = submit(pool, "train", pool.nlp_queue, "max")  # one pod of 8 GPUs
    placed(workload, "n2", list(range(8)))
    page = text(live(page_as("max"), "/workloads/nlp/train/"))
    table = page.split("Where its pods are", 1)[1].split("</table>", 1)[0]
    assert '<th scope="col" class="number">GPUs</th>' in table
    assert "GPU indices</th>" in table  # the placements API's ``gpu_indices``
    assert '<td class="number" data-column="gpus">8 GPUs</td>' in table
    assert '<td data-column="gpu_indices">0, 1, 2, 3, 4, 5, 6, 7</td>' in table


# ----------------------------------------------------------------------------- 2 the zone


def test_a_zone_is_named_by_its_offset_in_summaries_and_tables_alike(
    pool: Any, page_as: Any
) -> None:
    assert zone_name(datetime(2026, 12, 5, 14, 3, tzinfo=UTC)) == "UTC"
    assert zone_name(datetime(2026, 12, 5, 14, 3, tzinfo=BERLIN)) == "UTC+1"
    assert zone_name(datetime(2026, 7, 5, 14, 3, tzinfo=BERLIN)) == "UTC+2"
    assert zone_name(datetime(2026, 7, 5, tzinfo=ZoneInfo("Asia/Kolkata"))) == "UTC+5:30"
    assert zone_name(datetime(2026, 7, 5, tzinfo=ZoneInfo("America/Sao_Paulo"))) == "UTC-3"
    workload = submit(pool, "train", pool.nlp_queue, "max")
    placed(workload, "n2", list(range(8)))
    started = datetime(2026, 12, 5, 14, 3, tzinfo=UTC)
    Workload.objects.filter(pk=workload.pk).update(
        state="running", submitted_at=started, admitted_at=started, started_at=started
    )
    workload.transitions.update(at=started)
    assert (
        summary(Workload.objects.get(pk=workload.pk), seen=AS_WRITTEN, units=FlavorUnits())
        == "Running since 2026-12-05 14:03 UTC."
    )
    client = page_as("max")
    client.cookies["gpupool_tz"] = "Europe/Berlin"
    page = text(client.get("/workloads/nlp/train/"))
    assert "Running since 2026-12-05 15:03 UTC+1." in page  # the summary
    assert ">2026-12-05 15:03 UTC+1</time>" in page  # the table, as the server writes it
    assert "CET" not in page
    # the footer names the zone as the charts' axes do
    assert "Times are shown in your time zone (<span data-zone>Europe/Berlin</span>)" in page
    # and the browser names it as the server does, not by its own abbreviation (GMT+1)
    script = (Path(settings.BASE_DIR) / "frontend" / "js" / "time.js").read_text()
    assert "timeZoneName" not in script and '"UTC" + (minutes > 0 ? "+" : "-")' in script


# ----------------------------------------------------------------------------- 3 formats


def test_each_quantity_has_one_format_whatever_places_it_is_kept_with() -> None:
    assert gpu_hours(Decimal("200.000")) == gpu_hours(Decimal("200.0000")) == "200 GPU-h"
    assert gpu_hours(Decimal("129.7765")) == "129.78 GPU-h"
    assert gpus(Decimal("51.6833")) == "51.683 GPUs"
    # the Audit page's before and after: a budget's grant (3 places) and balance (4) alike
    assert field_value("gpu_hours", "200.000") == "200 GPU-h"
    assert field_value("remaining_gpu_hours", "129.7765") == "129.78 GPU-h"
    assert field_value("deserved", "52.667") == "52.667 GPUs"
    assert field_value("name", "nlp") == "nlp"


def test_the_audit_page_shows_budget_gpu_hours_in_the_pages_format(pool: Any, page_as: Any) -> None:
    record_audit_event(
        acting_user=None,
        action="quotas.cycle_budget",
        instance=pool.nlp,
        before={"remaining_gpu_hours": "129.7765", "gpu_hours": "200.000"},
        after={"remaining_gpu_hours": "128.1063", "gpu_hours": "250.000"},
    )
    page = rows(text(page_as("ada").get("/audit/?action=quotas.cycle_budget")))
    assert "129.78 GPU-h → 128.11 GPU-h" in page
    assert "200 GPU-h → 250 GPU-h" in page
    assert "129.7765" not in page and "200.000" not in page


def test_the_fragmentation_cards_and_table_use_the_one_gpu_format(pool: Any, page_as: Any) -> None:
    template = Path(settings.BASE_DIR) / "templates/dashboard/partials/fragmentation_live.html"
    written = template.read_text()
    assert "|gpus:" not in written and "floatformat" not in written


# ----------------------------------------------------------------------------- 4 the legend


def test_the_heatmap_legend_counts_a_shared_gpus_free_rest_as_the_cells_do(
    pool: Any, page_as: Any
) -> None:
    l40s = flavor("l40s-shared", sharing="shared", gpu_memory_gb=48)
    node("s1", l40s, gpus=2)
    quota(pool.nlp_queue, l40s, 0, 2, 2)
    notebook = do_submit_workload(
        "nb",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=1, flavor=l40s, gpu_milli=250)],
    )
    placed(notebook, "s1", [0], milli=250)
    page = text(live(page_as("ada"), "/fragmentation/?flavor=l40s-shared"))
    # GPU 1 is whole and free; GPU 0 has 0.75 of it free: 1.75 free, as the table says
    assert 'free <span class="muted">(1.75)</span>' in page
    assert 'nlp <span class="muted">(0.25)</span>' in page
    assert "s1 GPU 0 (domain s1): nlp 0.25 GPUs, 0.75 GPUs free" in page
    table = page.split("Per node", 1)[1].split("</table>", 1)[0]  # l40s: no NVLink
    assert '<td class="number">1.75</td>' in table


# ----------------------------------------------------------------------------- 5 audit


def test_a_sync_registration_audits_no_raw_moment_and_the_page_shows_it_in_the_viewers_zone(
    pool: Any, page_as: Any
) -> None:
    at = datetime(2026, 12, 5, 10, 31, 22, 123456, tzinfo=UTC)
    shape = PodSetShape("set-0", 1, 1, (pool.h100.pk,), None, Decimal(1), Decimal(1))
    registration = Registration(
        WorkloadKey("nlp", "made-with-kubectl"), "nlp", None, (shape,), "bare", at,
        None, "", None, None,
    )  # fmt: skip
    assert do_record_cluster_sync(SyncDecision(at=at, registrations=[registration])) == []
    (event,) = AuditEvent.objects.filter(action="control.register_workloads")
    assert event.reason == "pods made outside gpupool, registered by the cluster sync"
    assert event.after["at"] == at.isoformat()
    client = page_as("ada")
    client.cookies["gpupool_tz"] = "Europe/Berlin"
    page = rows(text(client.get("/audit/?action=control.register_workloads")))
    assert "cluster sync at 2026-12-05T10:31" not in page  # the old reason's raw moment
    assert "registered by the cluster sync <span" in page
    assert ">2026-12-05 11:31 UTC+1</time> on the pool's clock)" in page


# ----------------------------------------------------------------------------- 6 drafts


def test_a_drafts_first_step_says_drafted_not_filed(pool: Any, page_as: Any) -> None:
    draft = quota_request(pool, justification="more", guarantee=4)
    page = text(page_as("lena").get(f"/requests/{draft.pk}/"))
    steps = page.split("<h2>Steps</h2>", 1)[1].split("</ol>", 1)[0]
    assert "<strong>drafted</strong>" in steps and "by lena" in steps
    assert "filed" not in steps


# ----------------------------------------------------------------------------- 7 submitter


def test_work_no_person_submitted_names_what_submitted_it_not_the_scheduler(
    pool: Any, page_as: Any
) -> None:
    generated = do_submit_workload(
        "train-00001",
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=1, flavor=pool.h100)],
        reason=SUBMITTED_BY_GENERATOR,
    )
    page = text(live(page_as("max"), "/workloads/nlp/train-00001/"))
    first = page.split("Every change of state", 1)[1].split("</tr>", 2)[1]
    assert "submitted by the demo generator" in first
    assert '<span class="muted" data-submitted-by>the system</span>' in first
    assert "the scheduler" not in first
    Workload.objects.filter(pk=generated.pk).update(origin="bare")
    page = text(live(page_as("max"), "/workloads/nlp/train-00001/"))
    assert "data-submitted-by>kubectl (namespace nlp)</span>" in page
    Workload.objects.filter(pk=generated.pk).update(origin="controller")
    page = text(live(page_as("max"), "/workloads/nlp/train-00001/"))
    assert "data-submitted-by>a controller (namespace nlp)</span>" in page
