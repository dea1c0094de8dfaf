"""The pool's public state through the API: nodes with their GPUs and health (admins cordon
and set GPU health), fragmentation per flavor, the scheduling cycles; and preemption events,
which show a victim's tenant who caused them only at the queue level."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from csv_exports import downloaded, paged_as_csv
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from domain_builders import node
from resources_pool import pool, submit

from gpupool.accounting.actions import do_record_preemption
from gpupool.api import tables
from gpupool.audit.models import AuditEvent
from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.control.queries import pool_snapshot
from gpupool.control.snapshot import SnapshotError
from gpupool.inventory.models import Gpu, Node
from gpupool.quotas.models import PriorityClass
from gpupool.workloads.actions import PlacementSpec, do_transition_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    return pool(world)


def run(resources: dict, name: str, on: str, gpus: list[int]) -> Any:
    """Vision runs ``len(gpus)`` GPUs on node ``on``, started an hour ago."""
    workload = submit(name, resources["vision"], resources["other_workload"].submitter, len(gpus))
    start = timezone.now() - timedelta(hours=1)
    placement = PlacementSpec("main", 0, Node.objects.get(name=on), gpus)
    do_transition_workload(workload, "admitted", reason="fits", at=start, placements=[placement])
    do_transition_workload(workload, "running", reason="started", at=start)
    return workload


# ----------------------------------------------------------------------------- nodes


def test_every_role_reads_the_nodes_with_their_gpus_and_health(
    api_as: Any, resources: dict
) -> None:
    api_as("admin").post(
        "/api/v1/nodes/n2/gpus/7/health/", {"healthy": False, "reason": "XID 79"}, format="json"
    )
    nodes = {n["name"]: n for n in api_as("member").get("/api/v1/nodes/").json()["results"]}
    n2 = nodes["n2"]
    assert (n2["flavor"], n2["nvlink_domain"], n2["healthy_gpus"], n2["cordoned"]) == (
        "h100",
        "d2",
        7,
        False,
    )
    assert n2["health"] == ["gpu 7: XID 79"]
    assert n2["gpus"][7] == {"index": 7, "healthy": False, "unhealthy_reason": "XID 79", "uuid": ""}
    unhealthy = api_as("member").get("/api/v1/nodes/?unhealthy=true").json()["results"]
    assert [n["name"] for n in unhealthy] == ["n2"]


def test_an_admin_cordons_and_uncordons_a_node_through_the_audited_action(
    api_as: Any, resources: dict
) -> None:
    cordoned = api_as("admin").post("/api/v1/nodes/n1/cordon/", {"reason": "firmware"})
    assert cordoned.status_code == 200
    assert cordoned.json()["cordoned"] is True
    assert cordoned.json()["health"] == ["cordoned: no new placements"]
    assert api_as("member").get("/api/v1/nodes/?cordoned=true").json()["count"] == 1
    api_as("admin").post("/api/v1/nodes/n1/uncordon/")
    assert not Node.objects.get(name="n1").cordoned
    reasons = list(
        AuditEvent.objects.filter(action="inventory.set_node_cordoned")
        .order_by("id")
        .values_list("reason", flat=True)
    )
    assert reasons == ["firmware", ""]


def test_gpu_health_says_why_and_recovery_clears_it(api_as: Any, resources: dict) -> None:
    url = "/api/v1/nodes/n1/gpus/3/health/"
    refused = api_as("admin").post(url, {"healthy": False}, format="json")
    assert refused.status_code == 400 and "reason" in refused.json()["error"]["fields"]
    api_as("admin").post(url, {"healthy": False, "reason": "DCGM: ECC errors"}, format="json")
    recovered = api_as("admin").post(url, {"healthy": True}, format="json")
    assert recovered.json()["health"] == []
    gpu = Gpu.objects.get(node__name="n1", index=3)
    assert gpu.healthy and gpu.unhealthy_reason == ""
    assert api_as("admin").post("/api/v1/nodes/n1/gpus/8/health/").status_code == 404


@pytest.mark.parametrize("extra", [0, 10])
def test_the_node_list_costs_the_same_queries_however_many_nodes(
    api_as: Any, resources: dict, django_assert_max_num_queries: Any, extra: int
) -> None:
    for index in range(extra):
        node(f"x{index}", resources["h100"], gpus=8)
    client = api_as("member")
    with django_assert_max_num_queries(5):
        response = client.get("/api/v1/nodes/")
    assert response.json()["count"] == 2 + extra


# ----------------------------------------------------------------------------- fragmentation


def fragmentation(api_as: Any) -> dict[str, Any]:
    response = api_as("member").get("/api/v1/fragmentation/")
    assert response.status_code == 200, response.content
    return response.json()


def test_fragmentation_counts_free_gpus_and_the_gangs_that_fit_in_one_domain(
    api_as: Any, resources: dict
) -> None:
    run(resources, "a", "n1", [0, 1, 2])
    run(resources, "b", "n2", [0, 1, 2, 3, 4, 5])
    answer = fragmentation(api_as)
    assert answer["cycle_id"] == resources["cycle"].pk
    [h100] = answer["flavors"]
    assert (h100["nodes"], h100["domains"], h100["healthy_gpus"], h100["free_gpus"]) == (
        2,
        2,
        16,
        7.0,
    )
    # n1 has 5 whole GPUs free, n2 has 2; each node is its own NVLink domain.
    assert h100["largest_gang_gpus"] == 5
    gangs = {
        gang["gpus"]: (gang["pods"], gang["gpus_per_pod"], gang["gangs"]) for gang in h100["gangs"]
    }
    # Gangs of 16 and 72 never fit inside one 8-GPU domain: not counted as fitting none now.
    assert h100["largest_domain_gpus"] == 8
    assert gangs == {
        1: (1, 1, 7),
        2: (1, 2, 3),  # two on n1, one on n2
        4: (1, 4, 1),
        8: (1, 8, 0),
    }
    assert h100["fragmented_gpus"] >= 0 and h100["stranded_gpus"] >= 0


def test_fragmentation_leaves_out_unhealthy_gpus_and_cordoned_nodes(
    api_as: Any, resources: dict
) -> None:
    api_as("admin").post("/api/v1/nodes/n2/cordon/")
    api_as("admin").post(
        "/api/v1/nodes/n1/gpus/0/health/", {"healthy": False, "reason": "XID 48"}, format="json"
    )
    cache.clear()  # the changes above are not a new cycle: drop the cached view
    [h100] = fragmentation(api_as)["flavors"]
    assert (h100["healthy_gpus"], h100["free_gpus"], h100["largest_gang_gpus"]) == (7, 7.0, 7)


def test_figures_are_computed_once_per_finished_cycle(api_as: Any, resources: dict) -> None:
    assert fragmentation(api_as)["flavors"][0]["free_gpus"] == 16.0
    run(resources, "a", "n1", [0, 1, 2, 3])
    assert fragmentation(api_as)["flavors"][0]["free_gpus"] == 16.0  # same cycle, same view
    now = timezone.now()
    cycle = do_finish_cycle(do_start_cycle(at=now), at=now, status="succeeded")
    answer = fragmentation(api_as)
    assert (answer["cycle_id"], answer["flavors"][0]["free_gpus"]) == (cycle.pk, 12.0)


# ----------------------------------------------------------------------------- cycles


def test_everyone_reads_the_last_cycles_summary_and_admins_the_records(
    api_as: Any, resources: dict
) -> None:
    latest = api_as("member").get("/api/v1/scheduling-cycles/latest/").json()
    assert latest["id"] == resources["cycle"].pk and latest["status"] == "succeeded"
    assert latest["duration_s"] == pytest.approx(2.0) and latest["pending"] == 2
    assert "error" not in latest
    do_start_cycle(at=timezone.now())  # running: not finished, so not the latest
    assert api_as("member").get("/api/v1/scheduling-cycles/latest/").json()["id"] == latest["id"]
    records = api_as("admin").get("/api/v1/scheduling-cycles/?status=running").json()["results"]
    assert [r["status"] for r in records] == ["running"] and records[0]["finished_at"] is None


def test_the_latest_cycle_is_404_before_any_has_finished(api_as: Any, world: Any) -> None:
    response = api_as("member").get("/api/v1/scheduling-cycles/latest/")
    assert response.status_code == 404
    assert "No scheduling cycle has finished yet" in response.json()["error"]["message"]


@pytest.mark.parametrize("extra", [0, 10])
def test_the_cycle_list_costs_the_same_queries_however_many_cycles(
    api_as: Any, resources: dict, django_assert_max_num_queries: Any, extra: int
) -> None:
    for _ in range(extra):
        do_start_cycle(at=timezone.now())
    client = api_as("admin")
    with django_assert_max_num_queries(4):
        response = client.get("/api/v1/scheduling-cycles/")
    assert response.json()["count"] == 1 + extra


# ----------------------------------------------------------------------------- preemptions


def test_a_victims_tenant_sees_its_preemptions_with_the_preemptors_queue_not_its_name(
    api_as: Any, resources: dict
) -> None:
    victim = resources["own_workload"]
    do_record_preemption(
        victim,
        reason="reclaim",
        at=timezone.now(),
        gpus_freed=4,
        lost_gpu_hours=3,
        preemptor=resources["other_workload"],
    )
    events = api_as("member").get("/api/v1/preemptions/?reason=reclaim").json()["results"]
    [event] = events
    assert (event["victim"], event["preemptor_queue"], event["preemptor_class"]) == (
        "nlp/train-1",
        "vision-train",
        "normal",
    )
    assert event["preemptor"] is None and event["preemptor_owner"] is None
    # The preemptor's own tenant does not see another tenant's victims at all.
    vision_lead = api_as("admin")
    vision_lead.force_authenticate(resources["other_workload"].submitter)
    assert vision_lead.get("/api/v1/preemptions/?reason=reclaim").json()["count"] == 0
    every = api_as("admin").get("/api/v1/preemptions/?reason=reclaim").json()["results"]
    assert every[0]["preemptor"] == "vision/train-1" and every[0]["preemptor_owner"] == "vera"
    assert api_as("member").get("/api/v1/preemptions/?tenant=vision").json()["count"] == 0


def test_a_preemption_inside_ones_own_tenant_names_the_preemptor(
    api_as: Any, resources: dict
) -> None:
    lead = resources["own_workload"].submitter
    urgent = submit("urgent-1", resources["nlp"], lead, gpus=4)
    do_record_preemption(
        resources["own_workload"],
        reason="preempt",
        at=timezone.now(),
        gpus_freed=4,
        lost_gpu_hours=1,
        preemptor=urgent,
    )
    [event] = api_as("member").get("/api/v1/preemptions/?reason=preempt").json()["results"]
    assert (event["preemptor"], event["preemptor_owner"]) == ("nlp/urgent-1", "lena")


def test_the_preemption_history_downloads_as_csv_scoped_and_filtered_as_its_pages(
    api_as: Any, resources: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every event the filters keep, however many pages they fill (and however many batches
    the download renders), with the same values as the JSON; a victim's tenant still sees
    the preemptor's queue, not its name."""
    monkeypatch.setattr(tables, "CSV_BATCH", 2)
    now = timezone.now()
    for minutes, reason in enumerate(["reclaim", "reclaim", "preempt", "reclaim", "reclaim"]):
        do_record_preemption(
            resources["own_workload"],
            reason=reason,
            at=now - timedelta(minutes=minutes),
            gpus_freed=4,
            lost_gpu_hours=minutes,
            preemptor=resources["other_workload"],
        )
    member, admin = api_as("member"), api_as("admin")

    rows = downloaded(member, "/api/v1/preemptions/?reason=reclaim", "preemptions")

    assert len(rows) == 4 and rows == paged_as_csv(member, "/api/v1/preemptions/?reason=reclaim")
    assert {(row["preemptor"], row["preemptor_queue"]) for row in rows} == {("", "vision-train")}
    every = downloaded(admin, "/api/v1/preemptions/")
    assert every == paged_as_csv(admin, "/api/v1/preemptions/")
    mine = [row for row in every if row["reason"] in ("reclaim", "preempt")]
    assert [row["preemptor"] for row in mine] == ["vision/train-1"] * 5
    assert downloaded(member, "/api/v1/preemptions/?tenant=vision") == []
    # One event is no table: its detail answers JSON, and CSV is refused, naming the formats.
    detail = admin.get(f"/api/v1/preemptions/{every[0]['id']}/?format=csv")
    assert detail.status_code == 406 and "json" in detail.json()["error"]["message"]


@pytest.mark.parametrize("extra", [0, 10])
def test_the_preemption_list_costs_the_same_queries_however_long(
    api_as: Any, resources: dict, django_assert_max_num_queries: Any, extra: int
) -> None:
    for _ in range(extra):
        do_record_preemption(
            resources["own_workload"],
            reason="reclaim",
            at=timezone.now(),
            gpus_freed=1,
            lost_gpu_hours=1,
            preemptor=resources["other_workload"],
        )
    client = api_as("member")
    with django_assert_max_num_queries(5):
        response = client.get("/api/v1/preemptions/")
    assert response.json()["count"] == 1 + extra


def test_the_cached_snapshot_reads_back_as_it_was_built(resources: dict) -> None:
    built = pool_snapshot()  # built, and kept in the cache under the cycle's id
    again = pool_snapshot()  # read back from the cache (pickled: compiled core classes too)
    assert again.cycle_id == built.cycle_id == resources["cycle"].pk
    assert again.value.snapshot == built.value.snapshot
    assert again.value.workload_ids == built.value.workload_ids


def test_a_pool_that_cannot_be_planned_is_tried_once_per_cycle(resources: dict) -> None:
    PriorityClass.objects.update(default=False)  # the core plans no pool without a default
    cache.clear()
    with pytest.raises(SnapshotError) as first:
        pool_snapshot()
    with CaptureQueriesContext(connection) as again, pytest.raises(SnapshotError) as second:
        pool_snapshot()
    assert str(second.value) == str(first.value) and "default" in str(first.value)
    assert len(again) == 1  # the last cycle's id; the failure comes from the cache
    PriorityClass.objects.filter(name="normal").update(default=True)
    now = timezone.now()
    cycle = do_finish_cycle(do_start_cycle(at=now), at=now, status="succeeded")
    assert pool_snapshot().cycle_id == cycle.pk  # the next cycle tries again


def test_times_in_filters_take_any_offset_and_compare_in_utc(api_as: Any, resources: dict) -> None:
    cycle = resources["cycle"]
    # PostgreSQL refuses an offset of 16 hours; the filter compares in UTC instead.
    since = (cycle.started_at - timedelta(minutes=1)).astimezone(
        timezone.get_fixed_timezone(-(16 * 60 + 8))
    )
    found = api_as("admin").get("/api/v1/scheduling-cycles/", {"since": since.isoformat()})
    assert found.status_code == 200 and found.json()["count"] == 1
    events = api_as("member").get("/api/v1/preemptions/", {"until": since.isoformat()})
    assert events.status_code == 200 and events.json()["count"] == 0
    before_utc = api_as("admin").get(
        "/api/v1/scheduling-cycles/", {"until": "0001-01-01T01:00:00+05:00"}
    )
    assert before_utc.status_code == 400 and "until" in before_utc.json()["error"]["fields"]
