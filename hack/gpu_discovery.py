"""Read a machine's NVIDIA GPUs as the cluster would see them, and check gpupool's node model.

On a real cluster gpupool never talks to a GPU: NVIDIA's GPU feature discovery (GFD, now in
the k8s-device-plugin repository) reads each GPU through NVML and labels the node
(``nvidia.com/gpu.product``, ``.count``, ``.memory``, ``.family``, ``gpu.clique``...), and the
device plugin offers ``nvidia.com/gpu`` (or ``nvidia.com/mig-<profile>``) as allocatable. The
inventory (``gpupool.clusters.inventory``) reads only those. This script closes the loop on a
machine that has a GPU:

``collect --out FILE``
    reads the GPUs with NVML (the ``nvidia-ml-py`` binding, NVIDIA's own) and ``nvidia-smi``,
    and writes the raw facts as JSON. Standard library and ``pynvml`` only, and nothing from
    gpupool: it runs on the GPU machine, which need not have gpupool's environment. It reads
    and changes nothing (MIG mode included).
``check FILE``
    here, with gpupool: builds the Node that GFD and the device plugin would publish from
    those facts (GFD's label rules, restated in ``gfd_labels``), passes it through the Kubernetes
    backend's own decoding (``api_objects.node_facts``) and the inventory, and compares the
    card's MIG profiles, as NVML lists them, with ``gpupool.scheduler.mig``'s table. Prints
    what it found and exits 1 when gpupool's model disagrees with the hardware.

A run on a device is kept in ``tests/clusters/data/`` and checked by the test suite
(``tests/clusters/test_gpu_discovery.py``), so the model stays checked against real hardware
on machines without a GPU. ``docs/gpu-discovery.md`` says how to run it and what one run found.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# - collect (on the GPU machine: standard library and pynvml only) -
# pynvml is imported inside the functions that call it: ``check`` runs where there is none.

SMI_COMMANDS: dict[str, list[str]] = {
    "list": ["-L"],
    "query": [
        "--query-gpu=index,name,uuid,pci.bus_id,memory.total,compute_cap,mig.mode.current,"
        "mig.mode.pending,driver_version",
        "--format=csv",
    ],
    "topo": ["topo", "-m"],
    "nvlink": ["nvlink", "-s"],
    "mig_gi_profiles": ["mig", "-lgip"],
    "mig_gi_placements": ["mig", "-lgipp"],
    "full": ["-q"],
}
NVLINK_LINKS = 18  # links per GPU on Hopper (H100/H200 SXM); fewer are reported as errors


def _smi(args: Sequence[str]) -> dict[str, Any]:
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return {"rc": None, "out": "", "err": "nvidia-smi not found"}
    done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, check=False)
    return {"rc": done.returncode, "out": done.stdout, "err": done.stderr}


def _nvml_call(function: Any, *args: Any) -> Any:
    """The call's result, or ``{"error": ...}`` (NVML's own words) when it refuses."""
    import pynvml

    try:
        return function(*args)
    except pynvml.NVMLError as exc:
        return {"error": str(exc)}


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _mig_profiles(handle: Any) -> list[dict[str, Any]]:
    """Every GPU instance profile NVML lists for the card, with its possible placements."""
    import ctypes

    import pynvml

    found = []
    for index in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        info = _nvml_call(pynvml.nvmlDeviceGetGpuInstanceProfileInfo, handle, index)
        if isinstance(info, dict):
            found.append({"profile_index": index, **info})
            continue
        row: dict[str, Any] = {
            "profile_index": index,
            "id": info.id,
            "name": _text(info.name),
            "slice_count": info.sliceCount,
            "instance_count": info.instanceCount,
            "memory_mb": info.memorySizeMB,
            "multiprocessors": info.multiprocessorCount,
        }
        placements = (pynvml.c_nvmlGpuInstancePlacement_t * 8)()
        count = ctypes.c_uint(8)
        placed = _nvml_call(
            pynvml.nvmlDeviceGetGpuInstancePossiblePlacements,
            handle,
            info.id,
            placements,
            ctypes.byref(count),
        )
        if isinstance(placed, dict):
            row["placements"] = placed
        else:
            row["placements"] = [
                {"start": p.start, "size": p.size} for p in placements[: count.value]
            ]
        found.append(row)
    return found


def _fabric(handle: Any) -> dict[str, Any]:
    import ctypes

    import pynvml

    info = pynvml.c_nvmlGpuFabricInfoV_t()
    answer = _nvml_call(pynvml.nvmlDeviceGetGpuFabricInfoV, handle, ctypes.byref(info))
    if isinstance(answer, dict):
        return answer
    return {
        "cluster_uuid": bytes(info.clusterUuid).hex(),
        "clique_id": info.cliqueId,
        "state": info.state,
        "status": info.status,
    }


def _nvlinks(handle: Any) -> list[Any]:
    import pynvml

    return [
        _nvml_call(pynvml.nvmlDeviceGetNvLinkState, handle, link) for link in range(NVLINK_LINKS)
    ]


def collect_nvml() -> dict[str, Any]:
    """The GPUs as NVML describes them (every refusal kept as NVML's error text)."""
    try:
        import pynvml
    except ImportError as exc:
        return {"error": f"pynvml not importable: {exc}"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"error": f"nvmlInit: {exc}"}
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = _nvml_call(pynvml.nvmlDeviceGetMemoryInfo, handle)
            gpus.append(
                {
                    "index": index,
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                    "memory_total_mib": (
                        memory if isinstance(memory, dict) else memory.total // (1024 * 1024)
                    ),
                    "compute_capability": _nvml_call(
                        pynvml.nvmlDeviceGetCudaComputeCapability, handle
                    ),
                    "mig_mode": _nvml_call(pynvml.nvmlDeviceGetMigMode, handle),
                    "max_mig_devices": _nvml_call(pynvml.nvmlDeviceGetMaxMigDeviceCount, handle),
                    "mig_profiles": _mig_profiles(handle),
                    "fabric": _fabric(handle),
                    "nvlink_state": _nvlinks(handle),
                }
            )
        return {
            "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
            "nvml": _text(pynvml.nvmlSystemGetNVMLVersion()),
            "binding": getattr(pynvml, "__version__", None),
            "gpus": gpus,
        }
    finally:
        pynvml.nvmlShutdown()


_SERIAL = re.compile(r"^(\s*(?:Chassis )?Serial Number\s*:).*$", re.MULTILINE)


def redact(smi_output: str) -> str:
    """``nvidia-smi -q`` without the board's serial numbers (a collection gets shared)."""
    return _SERIAL.sub(r"\1 (removed)", smi_output)


def collect() -> dict[str, Any]:
    """Everything ``check`` reads, as one JSON-able object."""
    import platform

    smi = {name: _smi(args) for name, args in SMI_COMMANDS.items()}
    smi["full"]["out"] = redact(smi["full"]["out"])
    return {
        "host": {"python": platform.python_version(), "machine": platform.machine()},
        "nvml": collect_nvml(),
        "nvidia_smi": smi,
    }


# - check (here, with gpupool) -

PRODUCT_LABEL = "nvidia.com/gpu.product"
# GFD's family by CUDA compute capability major (minor splits volta from turing at 7.5), as
# its labeler had it when read (2026-12): nothing after hopper is named there yet.
_FAMILIES = {
    1: "tesla",
    2: "fermi",
    3: "kepler",
    5: "maxwell",
    6: "pascal",
    8: "ampere",
    9: "hopper",
}


def arch_family(major: int, minor: int) -> str:
    """GFD's ``nvidia.com/gpu.family`` for a compute capability."""
    if major == 7:
        return "volta" if minor < 5 else "turing"
    return _FAMILIES.get(major, "undefined")


def gfd_labels(gpus: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The labels GFD puts on a node with these GPUs, not shared, MIG off (mig strategy none).

    GFD's rules (k8s-device-plugin, ``internal/lm``): the product is NVML's device name with
    spaces made dashes; count, memory (MiB, NVML's total) and replicas (1 once the device
    plugin's configuration is given, no time-slicing); family and compute capability;
    ``gpu.clique`` is ``<cluster UUID>.<clique id>`` when every GPU is attached to one NVLink
    fabric (GB200 NVL72), absent otherwise.
    """
    first = gpus[0]
    major, minor = first["compute_capability"]
    labels = {
        PRODUCT_LABEL: str(first["name"]).replace(" ", "-"),
        "nvidia.com/gpu.count": str(len(gpus)),
        "nvidia.com/gpu.memory": str(first["memory_total_mib"]),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.family": arch_family(major, minor),
        "nvidia.com/gpu.compute.major": str(major),
        "nvidia.com/gpu.compute.minor": str(minor),
        "nvidia.com/mig.capable": str(mig_capable(first)).lower(),
    }
    clique = fabric_clique(gpus)
    if clique:
        labels["nvidia.com/gpu.clique"] = clique
    return labels


def mig_capable(gpu: Mapping[str, Any]) -> bool:
    """Whether NVML reports a MIG mode for the GPU (it refuses on cards without MIG)."""
    return isinstance(gpu.get("mig_mode"), list)


def fabric_clique(gpus: Sequence[Mapping[str, Any]]) -> str | None:
    """``<cluster UUID>.<clique id>`` if every GPU reports the same completed fabric
    registration (NVML fabric state 3, a UUID not all zeros), else None."""
    seen = set()
    for gpu in gpus:
        fabric = gpu.get("fabric") or {}
        uuid = str(fabric.get("cluster_uuid", ""))
        if fabric.get("state") != 3 or not uuid.strip("0"):
            return None
        canonical = f"{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:32]}"
        seen.add(f"{canonical}.{fabric.get('clique_id')}")
    return seen.pop() if len(seen) == 1 else None


def node_object(name: str, gpus: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The Node the API server would hold: GFD's labels, the device plugin's GPUs."""
    amounts = {"cpu": "16", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": str(len(gpus))}
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": gfd_labels(gpus)},
        "spec": {},
        "status": {
            "capacity": amounts,
            "allocatable": amounts,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_MIG_NAME = re.compile(r"^(?:MIG )?(\d+g\.\d+gb(?:\+me)?)$")


def nvml_mig_table(gpu: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The card's MIG GPU-instance profiles NVML lists, by gpupool's profile name; the
    media-extension variants (``-me``, ``+gfx`` ...) other than ``+me`` are left out, as
    gpupool's table leaves them."""
    table = {}
    for row in gpu.get("mig_profiles") or []:
        match = _MIG_NAME.match(str(row.get("name", "")))
        if "error" in row or not match or isinstance(row.get("placements"), dict):
            continue
        table[match.group(1)] = row
    return table


def compare_mig(gpu: Mapping[str, Any]) -> tuple[str | None, list[str]]:
    """The key of gpupool's MIG table for this card and how NVML's profiles differ from it.

    The card is the table named by the device's model (``H200`` in "NVIDIA H200") whose
    full-card profile (``7g.<n>gb``) NVML lists; each of NVML's
    profiles must be in it with the same compute slices, memory slices (a placement's size),
    instance limit and start slots.
    """
    from gpupool.scheduler import mig

    listed = nvml_mig_table(gpu)
    if not listed:
        return None, []
    whole = [name for name in listed if name.startswith("7g.")]
    cards = [
        key
        for key, table in mig.MIG_PROFILES.items()
        if re.search(rf"\b{key.split('-')[0]}\b", str(gpu["name"]))
        and all(n in table for n in whole)
    ]
    if len(cards) != 1:
        return None, [
            f"{gpu['name']} lists MIG profiles {sorted(listed)}: gpupool's tables that fit "
            f"it by model and full-card profile are {cards or 'none'}"
        ]
    card = cards[0]
    ours = mig.MIG_PROFILES[card]
    problems = []
    for name, row in sorted(listed.items()):
        profile = ours.get(name)
        if profile is None:
            problems.append(f"{card}: NVML lists {name}, gpupool's table does not")
            continue
        placements = row["placements"]
        starts = tuple(p["start"] for p in placements)
        sizes = {p["size"] for p in placements}
        said = (row["slice_count"], sizes, row["instance_count"], starts)
        expected = (
            profile.compute_slices,
            {profile.memory_slices},
            profile.max_instances,
            profile.start_slots,
        )
        if said != expected:
            problems.append(
                f"{card} {name}: NVML says compute slices, memory slices, instances, starts "
                f"{said}; gpupool {expected}"
            )
    missing = sorted(set(ours) - set(listed))
    if missing:
        problems.append(f"{card}: gpupool's table has {missing}, NVML does not list them")
    return card, problems


def topology_links(topo: str) -> dict[tuple[str, str], str]:
    """``nvidia-smi topo -m``'s GPU-to-GPU matrix: (GPUi, GPUj) -> link (X, NV18, SYS, ...)."""
    plain = _ANSI.sub("", topo)  # nvidia-smi underlines the header, even into a pipe
    lines = [line.rstrip() for line in plain.splitlines() if line.strip()]
    if not lines:
        return {}
    header = lines[0].split()
    columns = [c for c in header if re.fullmatch(r"GPU\d+", c)]
    links = {}
    for line in lines[1:]:
        cells = line.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        for column, cell in zip(columns, cells[1:], strict=False):
            links[(cells[0], column)] = cell
    return links


def check(facts: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """What the facts show (lines to print) and where gpupool's model disagrees (problems)."""
    from gpupool.clusters.api_objects import node_facts
    from gpupool.clusters.inventory import FlavorSelector, node_inventory

    nvml = facts.get("nvml") or {}
    if "error" in nvml or not nvml.get("gpus"):
        return [], [f"no GPU read through NVML: {nvml.get('error', 'no GPUs')}"]
    gpus = nvml["gpus"]
    report = [f"driver {nvml['driver']}, NVML {nvml['nvml']}: {len(gpus)} GPU(s)"]
    problems: list[str] = []
    names = {gpu["name"] for gpu in gpus}
    if len(names) > 1:
        problems.append(f"GPUs of several models on one node: {sorted(names)}")
    labels = gfd_labels(gpus)
    report += [f"  label {key}={value}" for key, value in sorted(labels.items())]

    node = node_facts(node_object("gpu-node-0", gpus))
    flavor = FlavorSelector("this-card", {PRODUCT_LABEL: labels[PRODUCT_LABEL]})
    inventory = node_inventory(node, [flavor])
    report.append(
        f"  inventory: flavor {inventory.flavor}, {inventory.gpus} GPU(s), "
        f"NVLink domain {inventory.nvlink_domain}, schedulable {inventory.schedulable}"
    )
    if inventory.flavor != flavor.name or inventory.gpus != len(gpus):
        problems.append(f"the inventory read the node as {inventory}")
    expected_domain = labels.get("nvidia.com/gpu.clique", node.name)
    if inventory.nvlink_domain != expected_domain:
        problems.append(f"NVLink domain {inventory.nvlink_domain}, expected {expected_domain}")

    smi = facts.get("nvidia_smi") or {}
    links = topology_links((smi.get("topo") or {}).get("out", ""))
    pairs = {pair: link for pair, link in links.items() if pair[0] != pair[1]}
    not_nvlink = sorted(f"{a}-{b} {link}" for (a, b), link in pairs.items() if link[:2] != "NV")
    report.append(
        f"  topo -m: {len({a for a, _ in links})} GPU(s), pairs over NVLink "
        f"{len(pairs) - len(not_nvlink)} of {len(pairs)}"
    )
    if 0 < len(not_nvlink) < len(pairs) and "nvidia.com/gpu.clique" not in labels:
        # gpupool takes a node without a clique label for one NVLink domain (HGX boards);
        # GPUs joined in part (bridged pairs of PCIe cards) are not one. None joined (PCIe
        # cards alone) is no domain to respect, and no disagreement.
        problems.append(f"GPUs of this node are not all joined by NVLink: {not_nvlink}")
    for gpu in gpus:
        active = sum(1 for state in gpu["nvlink_state"] if state == 1)
        report.append(
            f"  GPU{gpu['index']} {gpu['name']}: {gpu['memory_total_mib']} MiB, compute "
            f"{gpu['compute_capability']}, MIG mode {gpu['mig_mode']}, NVLinks active {active}"
        )
        card, mig_problems = compare_mig(gpu)
        listed = nvml_mig_table(gpu)
        if card:
            report.append(f"  GPU{gpu['index']} MIG profiles {sorted(listed)}: gpupool's {card}")
        elif mig_capable(gpu):
            refused = {row.get("error") for row in gpu.get("mig_profiles") or [] if "error" in row}
            report.append(f"  GPU{gpu['index']} MIG profiles not listed: {sorted(refused)}")
        problems += mig_problems
    return report, problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    gather = commands.add_parser("collect", help="read the GPUs (on the GPU machine)")
    gather.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    judge = commands.add_parser("check", help="check gpupool's node model against a collection")
    judge.add_argument("file", type=Path, help="a file written by collect")
    args = parser.parse_args(argv)
    if args.command == "collect":
        facts = collect()
        args.out.write_text(json.dumps(facts, indent=1, sort_keys=True) + "\n")
        gpus = (facts["nvml"] or {}).get("gpus") or []
        print(f"{len(gpus)} GPU(s) read; {facts['nvml'].get('error', 'NVML answered')}")
        return 0 if gpus else 1
    try:
        facts = json.loads(args.file.read_text())
    except (OSError, ValueError) as exc:
        print(f"cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    report, problems = check(facts)
    print("\n".join(report))
    for problem in problems:
        print(f"DISAGREES: {problem}")
    print("gpupool's node model agrees with this machine" if not problems else "")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
