"""gpupool's node model against a real GPU: hack/gpu_discovery.py and what it read on an H200.

``data/h200-discovery-2026-12-04.json`` is ``gpu_discovery.py collect`` run on a machine with
one NVIDIA H200 (driver 580.159.04, MIG off), the session's lent device. Checking it here keeps
gpupool's MIG table and its reading of GPU feature discovery's labels tied to what NVML says,
on machines without a GPU.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from hack import gpu_discovery

H200 = Path(__file__).parent / "data" / "h200-discovery-2026-12-04.json"


@pytest.fixture
def h200() -> dict[str, Any]:
    facts: dict[str, Any] = json.loads(H200.read_text())
    return facts


def _profile(facts: dict[str, Any], name: str) -> dict[str, Any]:
    row: dict[str, Any] = next(
        r for r in facts["nvml"]["gpus"][0]["mig_profiles"] if r.get("name") == f"MIG {name}"
    )
    return row


def test_the_h200_read_on_a_device_agrees_with_gpupools_model(h200: dict[str, Any]) -> None:
    """GFD's labels for it become one schedulable GPU of its flavor, its own NVLink domain;
    the seven MIG profiles NVML lists are gpupool's H200-141GB table, slot for slot."""
    report, problems = gpu_discovery.check(h200)
    assert problems == []
    assert "  label nvidia.com/gpu.product=NVIDIA-H200" in report
    assert "  label nvidia.com/gpu.memory=143771" in report
    assert (
        "  inventory: flavor this-card, 1 GPU(s), NVLink domain gpu-node-0, schedulable True"
        in report
    )
    card, mig_problems = gpu_discovery.compare_mig(h200["nvml"]["gpus"][0])
    assert (card, mig_problems) == ("H200-141GB", [])
    assert sorted(gpu_discovery.nvml_mig_table(h200["nvml"]["gpus"][0])) == [
        "1g.18gb",
        "1g.18gb+me",
        "1g.35gb",
        "2g.35gb",
        "3g.71gb",
        "4g.71gb",
        "7g.141gb",
    ]


def test_gfd_labels_follow_gfds_rules(h200: dict[str, Any]) -> None:
    """Product: NVML's name with dashes for spaces; family from the compute capability; no
    clique without a completed NVLink fabric registration, one when every GPU has the same."""
    gpus = h200["nvml"]["gpus"]
    labels = gpu_discovery.gfd_labels(gpus)
    assert labels["nvidia.com/gpu.family"] == "hopper"
    assert labels["nvidia.com/gpu.count"] == "1"
    assert labels["nvidia.com/mig.capable"] == "true"
    assert "nvidia.com/gpu.clique" not in labels  # fabric state 0: not supported
    assert gpu_discovery.arch_family(7, 0) == "volta"
    assert gpu_discovery.arch_family(7, 5) == "turing"
    assert gpu_discovery.arch_family(8, 6) == "ampere"

    rack = [copy.deepcopy(gpus[0]) for _ in range(4)]
    for index, gpu in enumerate(rack):
        gpu["index"], gpu["name"] = index, "NVIDIA GB200"
        gpu["fabric"] = {"cluster_uuid": "0123456789abcdef" * 2, "clique_id": 7, "state": 3}
    assert gpu_discovery.gfd_labels(rack)["nvidia.com/gpu.product"] == "NVIDIA-GB200"
    clique = "01234567-89ab-cdef-0123-456789abcdef.7"
    assert gpu_discovery.gfd_labels(rack)["nvidia.com/gpu.clique"] == clique
    rack[3]["fabric"]["state"] = 2  # one GPU still registering: no label, as GFD
    assert "nvidia.com/gpu.clique" not in gpu_discovery.gfd_labels(rack)


def test_a_clique_label_makes_the_rack_the_nvlink_domain(h200: dict[str, Any]) -> None:
    """A node of a GB200 rack: its NVLink domain is the clique, not the node."""
    gpus = [copy.deepcopy(h200["nvml"]["gpus"][0]) for _ in range(4)]
    for index, gpu in enumerate(gpus):
        gpu["index"], gpu["name"] = index, "NVIDIA GB200"
        gpu["fabric"] = {"cluster_uuid": "ab" * 16, "clique_id": 1, "state": 3}
        gpu["mig_profiles"] = []  # the H200's, not a GB200's
    h200["nvml"]["gpus"] = gpus
    report, problems = gpu_discovery.check(h200)
    assert problems == []
    domain = "abababab-abab-abab-abab-abababababab.1"
    assert f"  inventory: flavor this-card, 4 GPU(s), NVLink domain {domain}, schedulable True" in (
        report
    )


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda f: _profile(f, "1g.35gb").update(instance_count=5), "H200-141GB 1g.35gb"),
        (lambda f: _profile(f, "3g.71gb").update(placements=[{"start": 0, "size": 4}]), "3g.71gb"),
        (lambda f: _profile(f, "2g.35gb").update(slice_count=3), "H200-141GB 2g.35gb"),
        (lambda f: _profile(f, "4g.71gb").update(name="MIG 5g.71gb"), "NVML lists 5g.71gb"),
        (
            lambda f: f["nvml"]["gpus"][0]["mig_profiles"].remove(_profile(f, "1g.18gb+me")),
            "gpupool's table has ['1g.18gb+me']",
        ),
        (
            lambda f: f["nvml"]["gpus"][0].update(name="NVIDIA B300"),
            "gpupool's tables that fit it by model and full-card profile are none",
        ),
    ],
)
def test_a_mig_table_unlike_the_hardware_is_reported(
    h200: dict[str, Any], change: Any, said: str
) -> None:
    """Each field compared (instances, start slots, slices, names, the card) can fail."""
    change(h200)
    _report, problems = gpu_discovery.check(h200)
    assert any(said in problem for problem in problems), problems


def test_the_topology_matrix_is_read_through_its_underlining(h200: dict[str, Any]) -> None:
    """nvidia-smi underlines the header with escape codes; a node whose GPUs are joined by
    NVLink only in part is reported (gpupool takes the node for one domain); PCIe alone is not."""
    assert gpu_discovery.topology_links(h200["nvidia_smi"]["topo"]["out"]) == {
        ("GPU0", "GPU0"): "X"
    }
    rows = ["\t\x1b[4mGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\x1b[0m"]
    rows += ["GPU0\t X \tNV18\tSYS\t0-15\t0", "GPU1\tNV18\t X \tSYS\t0-15\t0"]
    rows += ["GPU2\tSYS\tSYS\t X \t16-31\t1", "", "Legend:", "  X    = Self"]
    links = gpu_discovery.topology_links("\n".join(rows))
    assert links[("GPU0", "GPU1")] == "NV18" and links[("GPU2", "GPU0")] == "SYS"
    h200["nvml"]["gpus"] = [dict(h200["nvml"]["gpus"][0], index=i) for i in range(3)]
    h200["nvidia_smi"]["topo"]["out"] = "\n".join(rows)
    _report, problems = gpu_discovery.check(h200)
    assert problems == [
        "GPUs of this node are not all joined by NVLink: "
        "['GPU0-GPU2 SYS', 'GPU1-GPU2 SYS', 'GPU2-GPU0 SYS', 'GPU2-GPU1 SYS']"
    ]
    pcie_only = "\n".join(rows).replace("NV18", "PHB")  # PCIe cards: no NVLink at all
    h200["nvidia_smi"]["topo"]["out"] = pcie_only
    report, problems = gpu_discovery.check(h200)
    assert problems == [] and "  topo -m: 3 GPU(s), pairs over NVLink 0 of 6" in report


def test_check_exits_1_on_a_disagreement_and_2_on_an_unreadable_file(
    h200: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert gpu_discovery.main(["check", str(H200)]) == 0
    assert "gpupool's node model agrees with this machine" in capsys.readouterr().out
    _profile(h200, "1g.18gb")["instance_count"] = 6
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(h200))
    assert gpu_discovery.main(["check", str(changed)]) == 1
    assert "DISAGREES: H200-141GB 1g.18gb" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("{")
    assert gpu_discovery.main(["check", str(tmp_path / "bad.json")]) == 2


def test_collect_without_nvml_says_why_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a GPU the file says NVML's (or the import's) error; exit 1."""
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has an NVIDIA driver: collect reads its GPUs")
    out = tmp_path / "facts.json"
    assert gpu_discovery.main(["collect", "--out", str(out)]) == 1
    facts = json.loads(out.read_text())
    assert "error" in facts["nvml"]
    assert facts["nvml"]["error"] in capsys.readouterr().out


def test_serial_numbers_are_left_out_of_a_collection(h200: dict[str, Any]) -> None:
    text = "    Serial Number    : 1653924042819\n        Chassis Serial Number   : N/A\n"
    assert gpu_discovery.redact(text) == (
        "    Serial Number    : (removed)\n        Chassis Serial Number   : (removed)\n"
    )
    assert "16539" not in h200["nvidia_smi"]["full"]["out"]
