"""The Prometheus source reads what a real Prometheus scraped from the DCGM test exporter."""

from __future__ import annotations

import time

import pytest
from prometheus_builders import wait_for_scrapes

from gpupool.clusters.base import PodKey
from gpupool.utilization.activity import pod_activity
from gpupool.utilization.prometheus import PrometheusSource, range_query
from gpupool.utilization.source import UtilizationUnavailable
from hack.dcgm_test_exporter import DcgmTestExporter
from hack.prometheus_server import PrometheusServer


def test_a_read_reports_each_gpu_with_the_pod_holding_it_in_four_range_queries(
    prometheus: PrometheusServer, dcgm_exporter: DcgmTestExporter
) -> None:
    dcgm_exporter.add_node("read-1", 4)
    dcgm_exporter.set_gpu("read-1", 0, utilization=87, memory_used_mib=40_000,
                          pod=("team-a", "train-0", "main"))  # fmt: skip
    dcgm_exporter.set_gpu("read-1", 1, utilization=0, memory_used_mib=512,
                          pod=("team-b", "notebook-0", "jupyter"))  # fmt: skip
    start = wait_for_scrapes(dcgm_exporter)
    end = wait_for_scrapes(dcgm_exporter, 3)

    readout = PrometheusSource(prometheus.url).read(start, end, 1.0)

    mine = {(s.device.index, s.pod): s for s in readout.series if s.device.node == "read-1"}
    assert set(mine) == {
        (0, PodKey("team-a", "train-0")),
        (1, PodKey("team-b", "notebook-0")),
        (2, None),
        (3, None),
    }
    busy = mine[(0, PodKey("team-a", "train-0"))]
    assert busy.container == "main"
    assert busy.device.model == "NVIDIA H100 80GB HBM3"
    assert busy.device.uuid == dcgm_exporter.gpu("read-1", 0).uuid
    assert len(busy.samples) >= 2
    assert {s.utilization for s in busy.samples} == {87.0}
    assert {s.memory_used_mib for s in busy.samples} == {40_000.0}
    assert readout.queries == 4


def test_the_engine_activity_is_preferred_to_the_utilization_gauge_where_reported(
    prometheus: PrometheusServer, dcgm_exporter: DcgmTestExporter
) -> None:
    dcgm_exporter.add_node("prof-1", 2)
    for index in (0, 1):
        dcgm_exporter.set_gpu("prof-1", index, utilization=100,
                              pod=("team-a", f"prof-{index}", "main"))  # fmt: skip
    dcgm_exporter.set_gpu("prof-1", 1, engine_active=0.25)
    start = wait_for_scrapes(dcgm_exporter)
    end = wait_for_scrapes(dcgm_exporter, 2)

    readout = PrometheusSource(prometheus.url).read(start, end, 1.0)

    percent = {
        s.device.index: {sample.utilization for sample in s.samples}
        for s in readout.series
        if s.device.node == "prof-1"
    }
    assert percent == {0: {100.0}, 1: {25.0}}


def test_activity_counts_the_gpu_seconds_a_pod_held_and_used_against_a_hand_count(
    prometheus: PrometheusServer, dcgm_exporter: DcgmTestExporter
) -> None:
    # A two-GPU pod: one GPU busy, one idle; a one-GPU pod idle throughout.
    dcgm_exporter.add_node("count-1", 3)
    dcgm_exporter.set_gpu("count-1", 0, utilization=60, pod=("team-a", "two", "main"))
    dcgm_exporter.set_gpu("count-1", 1, utilization=0, pod=("team-a", "two", "main"))
    dcgm_exporter.set_gpu("count-1", 2, utilization=0, pod=("team-b", "one", "main"))
    wait_for_scrapes(dcgm_exporter)
    start = float(int(time.time()))
    end = start + 4
    wait_for_scrapes(dcgm_exporter, 6)

    readout = PrometheusSource(prometheus.url).read(start, end, 1.0)
    activity = pod_activity(readout)

    # 5 steps (start..end every second) of 1 s each, per GPU held.
    two, one = activity[PodKey("team-a", "two")], activity[PodKey("team-b", "one")]
    assert (two.gpus, two.observed_gpu_seconds, two.active_gpu_seconds) == (2, 10.0, 5.0)
    assert two.mean_utilization == 30.0
    assert two.last_active_at == end
    assert (one.gpus, one.observed_gpu_seconds, one.active_gpu_seconds) == (1, 5.0, 0.0)
    assert one.idle_gpu_seconds == 5.0
    assert one.last_active_at is None


def test_a_new_fatal_xid_is_reported_once_at_the_step_it_appeared(
    prometheus: PrometheusServer, dcgm_exporter: DcgmTestExporter
) -> None:
    dcgm_exporter.add_node("xid-1", 2)
    dcgm_exporter.set_gpu("xid-1", 1, xid=13)  # an application's fault, already there
    wait_for_scrapes(dcgm_exporter, 2)
    start = time.time()
    dcgm_exporter.set_gpu("xid-1", 0, xid=79)
    end = wait_for_scrapes(dcgm_exporter, 3)

    readout = PrometheusSource(prometheus.url).read(start, end, 1.0)

    reports = [r for r in readout.xid_errors if r.device.node == "xid-1"]
    assert [(r.device.index, r.code) for r in reports] == [(0, 79)]
    assert start <= reports[0].at <= end


def test_the_queries_group_by_device_and_pod_never_by_one_pod() -> None:
    query = range_query("DCGM_FI_DEV_GPU_UTIL")
    assert query.startswith("max by (Hostname, gpu, UUID, modelName, namespace, pod, container")
    assert "pod=" not in query


def test_an_unreachable_prometheus_is_unavailable_not_a_crash() -> None:
    source = PrometheusSource("http://127.0.0.1:9", timeout_s=2)
    with pytest.raises(UtilizationUnavailable, match=r"127\.0\.0\.1:9"):
        source.read(0, 60, 15)


def test_a_window_of_more_points_than_prometheus_returns_is_refused() -> None:
    with pytest.raises(ValueError, match="larger step"):
        PrometheusSource("http://127.0.0.1:9").read(0, 86_400, 1)
