"""A fatal XID from DCGM marks the GPU unhealthy, and the next cycle places nothing there."""

from __future__ import annotations

import time

import pytest
from loop_world import LoopWorld
from prometheus_builders import wait_for_scrapes

from gpupool.audit.models import AuditEvent
from gpupool.inventory.actions import do_set_gpu_health
from gpupool.inventory.models import Gpu
from gpupool.utilization.dcgm import FATAL_XIDS, xid_reason
from gpupool.utilization.health import mark_failing_gpus
from gpupool.utilization.prometheus import PrometheusSource
from gpupool.utilization.source import GpuDevice, XidReport
from gpupool.workloads.choices import WorkloadState
from hack.dcgm_test_exporter import DcgmTestExporter
from hack.prometheus_server import PrometheusServer

pytestmark = pytest.mark.django_db


def report(node: str, index: int, code: int, at: float = 0.0) -> XidReport:
    return XidReport(GpuDevice(node, index), code, at)


def test_an_xid_79_scraped_by_prometheus_marks_the_gpu_and_the_next_cycle_avoids_it(
    prometheus: PrometheusServer, dcgm_exporter: DcgmTestExporter
) -> None:
    world = LoopWorld()
    world.cycle()  # the node and its GPUs become inventory
    dcgm_exporter.add_node("u-1", 8)
    wait_for_scrapes(dcgm_exporter)
    start = time.time()
    dcgm_exporter.set_gpu("u-1", 3, xid=79)
    end = wait_for_scrapes(dcgm_exporter, 3)

    readout = PrometheusSource(prometheus.url).read(start, end, 1.0)
    marked = mark_failing_gpus(readout.xid_errors)

    assert [(m.node, m.index, m.code) for m in marked] == [("u-1", 3, 79)]
    gpu = Gpu.objects.get(node__name="u-1", index=3)
    assert (gpu.healthy, gpu.unhealthy_reason) == (
        False,
        "XID 79: GPU has fallen off the bus (DCGM)",
    )
    whole = world.submit("whole", gpus=8)
    seven = world.submit("seven", gpus=7)
    world.cycle()  # makes their pods
    world.cycle()
    assert world.workload("seven").state != WorkloadState.PENDING
    waiting = world.workload("whole")
    assert (waiting.state, waiting.pending_reason) == (WorkloadState.PENDING, "capacity")
    (placement,) = world.workload("seven").placements.all()
    assert 3 not in placement.gpu_indices
    assert whole.pk != seven.pk


def test_the_mark_is_audited_and_stays_through_the_cluster_sync() -> None:
    world = LoopWorld()
    world.cycle()

    mark_failing_gpus([report("u-1", 5, 48)])
    world.cycle()
    world.cycle()

    gpu = Gpu.objects.get(node__name="u-1", index=5)
    assert (gpu.healthy, gpu.unhealthy_reason) == (False, xid_reason(48))
    assert AuditEvent.objects.filter(action="inventory.set_gpu_health").count() == 1


def test_only_the_documented_fatal_xids_mark_a_gpu() -> None:
    world = LoopWorld()
    world.cycle()

    marked = mark_failing_gpus([report("u-1", 0, 13), report("u-1", 1, 31), report("u-1", 2, 94),
                                report("u-1", 4, 95), report("nowhere", 0, 79)])  # fmt: skip

    assert [(m.index, m.code) for m in marked] == [(2, 94), (4, 95)]
    assert {48, 63, 64, 74, 79, 94, 95} == set(FATAL_XIDS)


def test_an_admin_recovers_the_gpu_and_the_same_old_code_does_not_mark_it_again() -> None:
    world = LoopWorld()
    world.cycle()
    mark_failing_gpus([report("u-1", 2, 74, at=10)])
    gpu = Gpu.objects.get(node__name="u-1", index=2)

    do_set_gpu_health(gpu, healthy=True, acting_user=None, reason="reset, diagnostics pass")

    # The next window's readout holds no new code (the gauge did not change): nothing marked.
    assert mark_failing_gpus([]) == []
    gpu.refresh_from_db()
    assert gpu.healthy
    # A new fatal error marks it again.
    assert [m.code for m in mark_failing_gpus([report("u-1", 2, 79, at=20)])] == [79]


def test_a_gpu_an_admin_marked_keeps_the_admins_reason() -> None:
    world = LoopWorld()
    world.cycle()
    gpu = Gpu.objects.get(node__name="u-1", index=6)
    do_set_gpu_health(gpu, healthy=False, reason="fan replaced Tuesday", acting_user=None)

    assert mark_failing_gpus([report("u-1", 6, 79)]) == []
    gpu.refresh_from_db()
    assert gpu.unhealthy_reason == "fan replaced Tuesday"
