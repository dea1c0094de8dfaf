"""The idle policy end to end on the local Kubernetes plane (kube-apiserver + KWOK): an idle
interactive pod is alerted about (a Warning Event on it, the spell recorded), then reclaimed
after its timeout -- evicted through the normal eviction path, recorded with reason ``idle``,
and it ends; a busy pod is not; a pod inside its protected window is not.

The utilisation comes through the real path: the DCGM test exporter (the only stand-in, for
GPUs this machine lacks) reports what each pod's GPU does, a real Prometheus scrapes it every
second, and the loop's sampler reads it with range queries. The timeouts are seconds here so
that the test runs on the wall clock.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from test_control_loop_k8s import Plane
from test_control_loop_k8s import plane as plane_fixture  # noqa: F401 (the fixture, renamed)

from gpupool.accounting.models import PreemptionEvent
from gpupool.quotas.actions import do_save_priority_class
from gpupool.quotas.models import PriorityClass
from gpupool.utilization.prometheus import PrometheusSource
from gpupool.utilization.sampling import UtilizationSampler
from gpupool.workloads.choices import WorkloadState
from hack.dcgm_test_exporter import DcgmTestExporter
from hack.prometheus_server import PrometheusServer

pytestmark = [pytest.mark.k8s, pytest.mark.django_db(transaction=True)]

ALERT_S = 4
RECLAIM_S = 12


@pytest.fixture
def watched(plane_fixture: Plane) -> Iterator[tuple[Plane, DcgmTestExporter]]:  # noqa: F811
    """The plane with the DCGM test exporter reporting its nodes' GPUs, a Prometheus scraping
    it every second, and the loop's sampler reading it every second."""
    plane = plane_fixture
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    exporter = DcgmTestExporter().start()
    for node in plane.nodes:
        exporter.add_node(node, 8)
    server = PrometheusServer([exporter.address]).start()
    plane.loop.utilization = UtilizationSampler(
        PrometheusSource(server.url), interval_s=1, step_s=1
    )
    try:
        yield plane, exporter
    finally:
        server.stop()
        exporter.stop()


def report(plane: Plane, exporter: DcgmTestExporter, name: str, utilization: float) -> None:
    """The exporter says the workload's one pod works its GPU at ``utilization`` percent."""
    workload = plane.workload(name)
    [placement] = list(workload.placements.all())
    [pod] = plane.pods(selector=f"gpupool.io/workload={name}")
    for index in placement.gpu_indices:
        exporter.set_gpu(
            placement.node.name,
            index,
            pod=(workload.namespace, pod["metadata"]["name"], "main"),
            utilization=utilization,
            memory_used_mib=12_000,
        )


def idle_events(plane: Plane, name: str) -> list[Any]:
    """The Warning Events with reason Idle on the workload's pods."""
    events = plane.core.list_namespaced_event(plane.namespaces["team-a"]).items
    return [
        e for e in events if e.reason == "Idle" and e.involved_object.name.startswith(f"{name}-")
    ]


def test_an_idle_pod_is_alerted_then_reclaimed_a_busy_or_protected_one_is_not(
    watched: tuple[Plane, DcgmTestExporter],
) -> None:
    plane, exporter = watched
    interactive = PriorityClass.objects.filter(name="interactive").first() or PriorityClass(
        name="interactive", value=500
    )
    interactive.idle_alert_after_s = ALERT_S
    interactive.idle_reclaim_after_s = RECLAIM_S
    do_save_priority_class(interactive, acting_user=None)
    plane.submit("idle-nb", priority_class=interactive, protected_runtime_s=0)
    plane.submit("busy-nb", priority_class=interactive, protected_runtime_s=0)
    plane.submit("kept-nb", priority_class=interactive, protected_runtime_s=3600)
    for name in ("idle-nb", "busy-nb", "kept-nb"):
        plane.until(f"{name} running", lambda n=name: plane.workload(n).state == "running")
    report(plane, exporter, "idle-nb", 0.0)
    report(plane, exporter, "busy-nb", 92.0)
    report(plane, exporter, "kept-nb", 0.0)

    # alerted: the spell is recorded and the pod gets a Warning Event saying when it goes
    plane.until("idle-nb alerted", lambda: plane.workload("idle-nb").idle_alerted_since)
    assert plane.workload("idle-nb").state == WorkloadState.RUNNING
    [event] = plane.until("the Idle Event on idle-nb", lambda: idle_events(plane, "idle-nb"))
    assert event.type == "Warning" and "reclaimed at" in event.message

    # reclaimed through the eviction path: a preemption event with reason idle; it ends
    plane.until(
        "idle-nb reclaimed",
        lambda: PreemptionEvent.objects.filter(victim__name="idle-nb", reason="idle").exists(),
        timeout=120,
    )
    plane.until(
        "idle-nb ended, not requeued",
        lambda: (
            plane.workload("idle-nb").state == WorkloadState.PREEMPTED
            and not plane.bound("idle-nb")
        ),
    )
    event = PreemptionEvent.objects.get(victim__name="idle-nb")
    assert event.preemptor is None and event.gpus_freed == 1
    for _ in range(5):
        plane.cycle()
    assert plane.workload("idle-nb").state == WorkloadState.PREEMPTED
    assert not plane.pods(selector="gpupool.io/workload=idle-nb") or all(
        p["metadata"].get("deletionTimestamp")
        for p in plane.pods(selector="gpupool.io/workload=idle-nb")
    )

    # the busy one works: never idle; the protected one is idle, alerted, but kept
    busy, kept = plane.workload("busy-nb"), plane.workload("kept-nb")
    assert busy.state == WorkloadState.RUNNING and busy.idle_since is None
    assert busy.idle_alerted_since is None and not idle_events(plane, "busy-nb")
    assert kept.state == WorkloadState.RUNNING and kept.idle_since is not None
    assert kept.idle_alerted_since is not None
    assert not PreemptionEvent.objects.filter(victim__name__in=["busy-nb", "kept-nb"]).exists()
