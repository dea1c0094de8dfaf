"""Failing GPUs from DCGM: a fatal XID marks the GPU unhealthy in the inventory, with why.

The mark goes through the inventory's action (``do_set_gpu_health``: atomic, audited, and the
node's ``updated_at`` stamped so the control loop's next snapshot sees it), and the scheduler
places nothing on an unhealthy GPU. The exporter's gauge keeps the last code until the GPU is
reset, so only a code that is new in the window marks it: an admin who marks the GPU healthy
again (the recovery, after the reset) is not overruled by the same old code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpupool.control.sync import CLUSTER_UNHEALTHY
from gpupool.inventory.actions import do_set_gpu_health
from gpupool.inventory.models import Gpu
from gpupool.utilization.dcgm import FATAL_XIDS, xid_reason
from gpupool.utilization.source import XidReport


@dataclass(frozen=True, slots=True)
class FailingGpu:
    """A GPU a fatal XID marked unhealthy: node, index, code and the reason written."""

    node: str
    index: int
    code: int
    reason: str


def fatal_reports(reports: Iterable[XidReport]) -> dict[tuple[str, int], XidReport]:
    """The last fatal XID of each GPU (node, index) among ``reports``."""
    fatal: dict[tuple[str, int], XidReport] = {}
    for report in sorted(reports, key=lambda r: r.at):
        if report.code in FATAL_XIDS:
            fatal[(report.device.node, report.device.index)] = report
    return fatal


def mark_failing_gpus(reports: Iterable[XidReport]) -> list[FailingGpu]:
    """Mark each GPU that reported a new fatal XID unhealthy, saying which (a GPU an admin or
    an earlier XID already marked keeps its reason; one only the device plugin reported takes
    the XID's, which stays until an admin clears it). Returns the GPUs marked now."""
    fatal = fatal_reports(reports)
    if not fatal:
        return []
    gpus = {
        (gpu.node.name, gpu.index): gpu
        for gpu in Gpu.objects.select_related("node").filter(
            node__name__in={node for node, _ in fatal}, node__gone_at=None
        )
    }
    marked: list[FailingGpu] = []
    for key, report in sorted(fatal.items()):
        gpu = gpus.get(key)
        if gpu is None or not (gpu.healthy or gpu.unhealthy_reason == CLUSTER_UNHEALTHY):
            continue
        reason = xid_reason(report.code)
        do_set_gpu_health(gpu, healthy=False, reason=reason, acting_user=None)
        marked.append(FailingGpu(key[0], key[1], report.code, reason))
    return marked
