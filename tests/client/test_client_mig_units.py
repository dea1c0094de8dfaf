"""The client says a MIG flavor's sizes in MIG instances, the unit the flavor's capacity and
quotas count in (``inventory.units``), never GPUs: ``gpupool dry-run`` of a pod that asks more
than its largest node holds, and ``gpupool submit``, ``status`` and ``why`` of a workload of
it (the workloads API's ``unit``). Node m1 gives 16 3g.40gb instances (8 cards of two), h100
node n1 8 GPUs."""

from __future__ import annotations

from typing import Any

import pytest
from client_cli import run
from domain_builders import flavor, node, priority_class, queue, quota, tenant, user

pytestmark = pytest.mark.django_db(transaction=True)

MIG = "a100-3g.40gb"


@pytest.fixture
def pool(live_client: Any) -> None:
    """MIG node m1 (8 A100 cards of two 3g.40gb instances each) beside h100 node n1 (8 GPUs);
    max, a member of nlp, whose queue nlp has a quota of both, is logged in."""
    priority_class("normal", default=True)
    mig = flavor(MIG, sharing="mig", gpu_model="A100-80GB", mig_profile="3g.40gb", gpu_memory_gb=40)
    h100 = flavor("h100")
    node("m1", mig, gpus=8, mig_layout={"3g.40gb": 2})
    node("n1", h100, gpus=8)
    member = user("max")
    team = tenant("nlp", lead=user("lena"), members=(member,), namespaces=("nlp",))
    nlp = queue("nlp", parent=queue("pool"), tenant=team)
    quota(nlp, mig, 0, 8, 16)
    quota(nlp, h100, 0, 8, 16)
    live_client(member)


# The sentence is the server's (``workloads.actions.pod_set_spec_errors``), in the unit its
# flavors count in (``inventory.units.flavor_unit``).
def test_a_mig_pod_larger_than_any_node_is_told_in_mig_instances(pool: None) -> None:
    argv = ("dry-run", "--name", "big", "--queue", "nlp", "--image", "python:3.12")
    status, out, err = run(*argv, "--flavor", MIG, "--gpus", "20", "--", "sleep", "1")
    said = out + err
    assert status != 0, said  # refused: it could never run
    assert "20 MIG instances per pod" in said, said
    assert "the largest a100-3g.40gb node has 16" in said, said
    assert "GPUs per pod" not in said, said


def submit(name: str, of: str, gpus: int) -> str:
    """What ``gpupool submit`` prints for ``name``: one pod of ``gpus`` of flavor ``of``."""
    argv = ("submit", "--name", name, "--queue", "nlp", "--namespace", "nlp")
    status, out, err = run(
        *argv, "--image", "python:3.12", "--flavor", of, "--gpus", str(gpus), "--", "sleep", "1"
    )
    assert status == 0, err
    return out


def test_submit_status_and_why_say_a_mig_workloads_mig_instances(pool: None) -> None:
    assert "to queue nlp (2 MIG instances, class normal)" in submit("slices", MIG, 2)
    assert "to queue nlp (1 MIG instance, class normal)" in submit("slice", MIG, 1)
    assert "to queue nlp (4 GPUs, class normal)" in submit("whole", "h100", 4)
    status, out, err = run("status")
    assert status == 0, err
    header, *rows = out.splitlines()
    column = header.index("ASKS")
    asks = {row.split()[0]: row[column:].split("  ")[0] for row in rows if row.startswith("nlp/")}
    assert asks == {
        "nlp/slices": "2 MIG instances",
        "nlp/slice": "1 MIG instance",
        "nlp/whole": "4 GPUs",
    }
    status, out, err = run("why", "nlp/slices")
    assert status == 0, err
    assert "(tenant nlp), 2 MIG instances, class normal" in out.splitlines()[0], out
