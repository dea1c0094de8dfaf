"""``seed_demo._inventory`` says where a broken GPU's reason comes from on each plane: the
simulated cluster's here, the Kubernetes demo's from ``demo.record_gpu_findings`` (it no
longer claims only the simulated cluster says why), and the function it names exists."""

from __future__ import annotations

import inspect
from pathlib import Path

from gpupool.cli.subcommands import demo, seed_demo


def test_the_inventory_docstring_names_the_kubernetes_demo_s_findings() -> None:
    doc = " ".join((inspect.getdoc(seed_demo._inventory) or "").split())
    assert "Only the simulated cluster says why" not in doc
    assert "demo.record_gpu_findings" in doc
    assert callable(demo.record_gpu_findings)
    # and the plane's script records them after seeding, as the docstring says
    script = (Path(__file__).parents[2] / "hack" / "demo_k8s.sh").read_text()
    assert script.index("gpupool seed-demo") < script.index("record_gpu_findings(")
