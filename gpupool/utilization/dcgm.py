"""NVIDIA's DCGM exporter as gpupool reads it: metric and label names, and the fatal XIDs.

The names are the exporter's own (``dcgm-exporter``'s default counters), so a Prometheus that
already scrapes it needs no relabelling. ``pod``, ``namespace`` and ``container`` are set by
the exporter's Kubernetes mode (the kubelet's pod-resources API) on the GPUs a pod holds and
are empty on free ones; ``Hostname`` is the node (the exporter's DaemonSet sets it from
``spec.nodeName``); ``gpu`` is the device index on the node and ``UUID`` its serial identity.
"""

from __future__ import annotations

# Gauges, one series per GPU (per MIG instance with GPU_I_ID on MIG cards).
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent of time a kernel ran, 0..100
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # ratio 0..1; profiling metric, MIG-aware
FB_USED = "DCGM_FI_DEV_FB_USED"  # frame buffer used, MiB
XID_ERRORS = "DCGM_FI_DEV_XID_ERRORS"  # the code of the last XID error, 0 when none

POD_LABEL = "pod"
NAMESPACE_LABEL = "namespace"
CONTAINER_LABEL = "container"
GPU_LABEL = "gpu"
UUID_LABEL = "UUID"
HOSTNAME_LABEL = "Hostname"
MODEL_LABEL = "modelName"
# A scrape job without ``honor_labels: true`` renames the exporter's pod labels that clash
# with the job's own Kubernetes labels; these are read when the plain ones are empty.
EXPORTED_PREFIX = "exported_"

# The labels a GPU's series is grouped by: the device and the pod holding it.
SERIES_LABELS = (
    HOSTNAME_LABEL,
    GPU_LABEL,
    UUID_LABEL,
    MODEL_LABEL,
    NAMESPACE_LABEL,
    POD_LABEL,
    CONTAINER_LABEL,
    EXPORTED_PREFIX + NAMESPACE_LABEL,
    EXPORTED_PREFIX + POD_LABEL,
    EXPORTED_PREFIX + CONTAINER_LABEL,
)

# XIDs after which a GPU takes no new work until an admin says it recovered, from NVIDIA's
# Xid catalog (docs.nvidia.com/deploy/xid-errors, "Analyzing Xid Errors with the Xid Catalog",
# whose resolution for each is a GPU reset, a node reboot or a hardware check) and its page on
# dynamic page retirement (48, 63, 64). Application faults (13, 31, 43, 45) are not here: the
# application is at fault, not the GPU.
FATAL_XIDS: dict[int, str] = {
    48: "double-bit ECC error",
    63: "ECC page retirement or row remapping recorded: reset the GPU to activate",
    64: "ECC page retirement or row remapping failed",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    94: "contained ECC error",
    95: "uncontained ECC error",
}


def xid_reason(code: int) -> str:
    """The unhealthy reason of a GPU that reported fatal XID ``code``."""
    return f"XID {code}: {FATAL_XIDS.get(code, 'unknown error')} (DCGM)"
