"""One rule for a shared GPU's pod on every view: the Utilisation API (JSON and CSV), the
command line and the cost roll-up's reports count the same active GPU-hours for it
(``utilization.activity.counted_within_allocation``). Before, the page and API weighted the
whole GPU's seconds by the pod's share (0.325 GPU-hours for a pod at 0.65 busy half the hour)
while the roll-up only capped them at allocated (0.5)."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from domain_builders import flavor, priority_class, queue, tenant, user
from rest_framework.test import APIClient

from gpupool.accounting.actions import do_open_usage, do_roll_up_usage
from gpupool.accounting.models import UsageHour, WorkloadDay
from gpupool.cli.subcommands import utilization as command
from gpupool.clusters.base import PodKey
from gpupool.clusters.grouping import WorkloadKey
from gpupool.tenancy.actions import do_grant_site_role
from gpupool.utilization.activity import PodActivity
from gpupool.utilization.models import ActivityWindow
from gpupool.utilization.sampling import pod_share, record_activity
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

T = datetime.fromisoformat("2026-03-10T10:00:00+00:00")  # on an accounting hour (UTC)
H = timedelta(hours=1)
SHARE = 0.65
HALF_BUSY = SHARE * 0.5  # 0.65 of a GPU, its GPU busy half the hour


def shared_pod() -> Workload:
    """Team search's one pod holds 0.65 of an l40s-shared GPU from T-2h on."""
    l40s = flavor("l40s-shared", sharing="shared", gpu_memory_gb=48)
    priority_class("normal", default=True)
    team = tenant("search", namespaces=("search",))
    on = queue("search", parent=queue("root"), tenant=team)
    workload = do_submit_workload(
        "ranker",
        queue=on,
        pod_sets=[PodSetSpec(1, gpus=1, gpu_milli=650, flavor=l40s)],
        at=T - 3 * H,
    )
    do_open_usage(workload, flavor=l40s, gpus=Decimal("0.65"), at=T - 2 * H)
    return workload


def whole_gpu_window(workload: Workload, busy_seconds: float) -> None:
    """A window as the sampler recorded them before it weighed them: the whole GPU's
    seconds (3,600 observed in the hour before T)."""
    ActivityWindow.objects.create(
        workload=workload, tenant=workload.queue.tenant, queue=workload.queue,
        started_at=T - H, ended_at=T, gpus=1, observed_gpu_seconds=3_600,
        active_gpu_seconds=busy_seconds, mean_utilization=100.0 * busy_seconds / 3_600,
        last_active_at=T,
    )  # fmt: skip


def api_active(kind: str = "json") -> float:
    """The search team's active GPU-hours of the hour before T on the API, as finance."""
    finance = User.objects.filter(username="fin").first()
    if finance is None:
        finance = user("fin")
        do_grant_site_role(finance, role="finance", acting_user=None)
    client = APIClient()
    client.force_authenticate(finance)
    query = {"since": (T - H).isoformat(), "until": T.isoformat()}
    if kind == "csv":
        response = client.get("/api/v1/utilization/tenants/", query | {"format": "csv"})
        text = response.content.decode()
        header, row = text.splitlines()[:2]
        return float(dict(zip(header.split(","), row.split(","), strict=True))["active_gpu_hours"])
    (row,) = client.get("/api/v1/utilization/tenants/", query).json()
    return float(row["active_gpu_hours"])


def rolled_up_active() -> tuple[float, float]:
    """The hour before T's active GPU-hours in the cost roll-up: per tenant and workload."""
    do_roll_up_usage(until=T)
    hour = UsageHour.objects.get(hour=T - H)
    day = WorkloadDay.objects.get()
    assert float(hour.gpu_hours) == pytest.approx(SHARE)
    return float(hour.active_gpu_hours), float(day.active_gpu_hours)


def record_half_busy(workload: Workload) -> ActivityWindow:
    """The sampler reads the hour before T: the pod's GPU (the whole of it: 3,600 GPU-s)
    busy half of it, and records the pod's window."""
    seen = PodActivity(
        pod=PodKey("search", "ranker-main-0"), gpus=1, observed_gpu_seconds=3_600,
        active_gpu_seconds=1_800, mean_utilization=50.0, last_active_at=T.timestamp(),
    )  # fmt: skip
    record_activity(
        {seen.pod: seen},
        {seen.pod: WorkloadKey("search", "ranker")},
        start=(T - H).timestamp(),
        end=T.timestamp(),
    )
    return ActivityWindow.objects.get(workload=workload)


def test_a_half_busy_shared_pod_gives_the_same_gpu_hours_to_the_api_and_the_cost_roll_up() -> None:
    record_half_busy(shared_pod())

    on_the_api, in_the_csv = api_active(), api_active("csv")
    per_hour, per_workload = rolled_up_active()

    # 0.65 GPU held, its GPU busy half the hour: 0.325 GPU-hours active everywhere.
    assert on_the_api == pytest.approx(HALF_BUSY)
    assert in_the_csv == pytest.approx(HALF_BUSY)
    assert per_hour == pytest.approx(HALF_BUSY, abs=1e-4)
    assert per_workload == pytest.approx(HALF_BUSY, abs=1e-4)


def test_the_sampler_weighs_a_shared_pods_gpu_seconds_at_its_share_where_it_records_them() -> None:
    window = record_half_busy(shared_pod())

    assert window.observed_gpu_seconds == pytest.approx(SHARE * 3_600)
    assert window.active_gpu_seconds == pytest.approx(SHARE * 1_800)
    assert window.mean_utilization == pytest.approx(50.0)


def test_a_window_of_the_whole_gpu_counts_alike_on_the_api_and_in_the_cost_roll_up() -> None:
    """A window recorded before the sampler weighed the share (the whole GPU's seconds) is
    capped at what the pod held by the one rule: the API and the roll-up still agree."""
    whole_gpu_window(shared_pod(), busy_seconds=3_000)

    on_the_api = api_active()
    per_hour, per_workload = rolled_up_active()

    assert on_the_api == pytest.approx(per_hour, abs=1e-4)
    assert on_the_api == pytest.approx(per_workload, abs=1e-4)
    assert on_the_api <= SHARE


def test_the_command_line_counts_a_shared_pod_as_the_api_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record_half_busy(shared_pod())
    monkeypatch.setattr(command, "pool_clock", lambda: T)
    out = io.StringIO()

    command.run({"since": 3600.0, "json": True}, out, io.StringIO())

    (row,) = json.loads(out.getvalue())["tenants"]
    assert row["active_gpu_hours"] == pytest.approx(HALF_BUSY) == pytest.approx(api_active())


@pytest.mark.parametrize(
    ("pod", "sets", "share"),
    [
        ("ranker-main-0", [("main", 650)], 0.65),
        ("ranker-main-x-1", [("main-x", 250), ("main", 500)], 0.25),  # the longer name first
        ("ranker-main-1", [("main-x", 250), ("main", 500)], 0.5),
        ("ranker-abc12", [("main", 650)], 0.65),  # not named by gpupool: the one share there is
        ("ranker-abc12", [("main", 650), ("side", 300)], 1.0),  # which one is not known
        ("train-main-0", [("main", None)], 1.0),  # whole GPUs
        ("train-main-0", [], 1.0),
    ],
)
def test_a_pods_share_of_its_gpu_comes_from_its_pod_set(
    pod: str, sets: list[tuple[str, int | None]], share: float
) -> None:
    workload = pod.split("-")[0]

    assert pod_share(PodKey("search", pod), workload, sets) == pytest.approx(share)
