"""The utilisation source over Prometheus: PromQL range queries on the DCGM exporter's metrics.

One ``read`` sends four range queries with a step -- utilisation, graphics-engine activity,
memory used, XID errors -- each aggregated by device and pod (``max by (...)``), so the number
of queries does not grow with the number of GPUs or pods. ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``
(a 0..1 ratio, the profiling metric, also reported per MIG instance) is used for a GPU where
the exporter reports it, ``DCGM_FI_DEV_GPU_UTIL`` (percent) elsewhere.
"""

from __future__ import annotations

import gzip
import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from gpupool.clusters.base import PodKey
from gpupool.utilization import dcgm
from gpupool.utilization.source import (
    GpuDevice,
    GpuSample,
    GpuSeries,
    UtilizationReadout,
    UtilizationUnavailable,
    XidReport,
    check_window,
)

# (Hostname, gpu, UUID, modelName, namespace, pod, container): one GPU held by one pod.
SeriesKey = tuple[str, int, str, str, str, str, str]


DEVICE_LABELS = (dcgm.HOSTNAME_LABEL, dcgm.GPU_LABEL, dcgm.UUID_LABEL, dcgm.MODEL_LABEL)


def range_query(metric: str, labels: Sequence[str] = dcgm.SERIES_LABELS) -> str:
    """The PromQL of one metric per GPU and pod (or per ``labels``), whatever other labels
    the scrape job adds."""
    return f"max by ({', '.join(labels)}) ({metric})"


def _label(labels: Mapping[str, str], name: str) -> str:
    return labels.get(name) or labels.get(dcgm.EXPORTED_PREFIX + name) or ""


def _series_key(labels: Mapping[str, str]) -> SeriesKey | None:
    """The device and pod of a result's labels; None for a series that names no GPU."""
    try:
        index = int(labels.get(dcgm.GPU_LABEL, ""))
    except ValueError:
        return None
    return (
        labels.get(dcgm.HOSTNAME_LABEL, ""),
        index,
        labels.get(dcgm.UUID_LABEL, ""),
        labels.get(dcgm.MODEL_LABEL, ""),
        _label(labels, dcgm.NAMESPACE_LABEL),
        _label(labels, dcgm.POD_LABEL),
        _label(labels, dcgm.CONTAINER_LABEL),
    )


def _values(result: Mapping[str, Any]) -> dict[float, float]:
    """A matrix result's samples by time, NaNs left out."""
    values: dict[float, float] = {}
    for at, text in result.get("values", []):
        value = float(text)
        if not math.isnan(value):
            values[float(at)] = value
    return values


class PrometheusSource:
    """Reads DCGM's metrics from a Prometheus server's HTTP API (``GPUPOOL_PROMETHEUS_URL``)."""

    def __init__(self, url: str, *, timeout_s: float = 30.0) -> None:
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"a Prometheus URL is http:// or https://, not {url!r}")
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def query_range(
        self, query: str, start: float, end: float, step: float
    ) -> list[dict[str, Any]]:
        """One range query (``/api/v1/query_range``, POSTed); its matrix of results."""
        form = urllib.parse.urlencode(
            {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        ).encode()
        request = urllib.request.Request(  # noqa: S310 (http or https: checked above)
            f"{self.url}/api/v1/query_range",
            data=form,
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept-Encoding": "gzip",  # every series repeats its labels: they compress well
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310
                raw = response.read()
                if response.headers.get("Content-Encoding") == "gzip":
                    raw = gzip.decompress(raw)
                body = json.loads(raw)
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:300]
            raise UtilizationUnavailable(f"Prometheus refused {query!r}: {detail}") from error
        except (OSError, ValueError) as error:
            raise UtilizationUnavailable(f"Prometheus at {self.url}: {error}") from error
        if body.get("status") != "success":
            raise UtilizationUnavailable(f"Prometheus: {body.get('error', body)}")
        data = body.get("data", {})
        if data.get("resultType") != "matrix":
            raise UtilizationUnavailable(f"Prometheus answered a {data.get('resultType')}")
        return list(data.get("result", []))

    def _by_series(
        self,
        metric: str,
        start: float,
        end: float,
        step: float,
        labels: Sequence[str] = dcgm.SERIES_LABELS,
    ) -> dict[SeriesKey, dict[float, float]]:
        found: dict[SeriesKey, dict[float, float]] = {}
        for result in self.query_range(range_query(metric, labels), start, end, step):
            key = _series_key(result.get("metric", {}))
            if key is not None:
                found.setdefault(key, {}).update(_values(result))
        return found

    def read(self, start: float, end: float, step: float) -> UtilizationReadout:
        """The GPUs' use and XID errors in ``[start, end]`` every ``step``: four queries."""
        check_window(start, end, step)
        util = self._by_series(dcgm.GPU_UTIL, start, end, step)
        engine = self._by_series(dcgm.GR_ENGINE_ACTIVE, start, end, step)
        memory = self._by_series(dcgm.FB_USED, start, end, step)
        # Per device, whoever holds it; from one step earlier: the value before the window
        # tells a new error from an old one.
        xids = self._by_series(dcgm.XID_ERRORS, start - step, end, step, DEVICE_LABELS)
        return UtilizationReadout(
            start=start,
            end=end,
            step=step,
            series=merge_series(util, engine, memory),
            xid_errors=new_xid_errors(xids, start),
            queries=4,
        )


def _device(key: SeriesKey) -> GpuDevice:
    return GpuDevice(node=key[0], index=key[1], uuid=key[2], model=key[3])


def merge_series(
    util: Mapping[SeriesKey, Mapping[float, float]],
    engine: Mapping[SeriesKey, Mapping[float, float]],
    memory: Mapping[SeriesKey, Mapping[float, float]],
) -> tuple[GpuSeries, ...]:
    """One series per GPU and pod: the engine's activity (as percent) where reported, else
    the utilisation gauge; memory beside it."""
    merged: list[GpuSeries] = []
    for key in sorted(set(util) | set(engine)):
        percent = dict(util.get(key, {}))
        percent.update({at: ratio * 100.0 for at, ratio in engine.get(key, {}).items()})
        used = memory.get(key, {})
        namespace, pod, container = key[4], key[5], key[6]
        merged.append(
            GpuSeries(
                device=_device(key),
                pod=PodKey(namespace, pod) if pod else None,
                container=container,
                samples=tuple(GpuSample(at, percent[at], used.get(at)) for at in sorted(percent)),
            )
        )
    return tuple(merged)


def new_xid_errors(
    xids: Mapping[SeriesKey, Mapping[float, float]], start: float
) -> tuple[XidReport, ...]:
    """The XID codes each GPU changed to at or after ``start``, from series per device (the
    exporter's gauge holds the last error's code, so a code is new when it differs from the
    sample before it; a series first seen inside the window starts from 0)."""
    reports: list[XidReport] = []
    for key in sorted(xids):
        previous = 0.0
        for at, value in sorted(xids[key].items()):
            if at >= start and value != previous and value > 0:
                reports.append(XidReport(_device(key), int(value), at))
            previous = value
    return tuple(sorted(reports, key=lambda r: (r.at, r.device.node, r.device.index)))
