"""`gpupool sim ...` acts only on the simulated cluster: with ``GPUPOOL_CLUSTER=kubernetes``
every action refuses with exit status 2 naming the configured cluster, and touches nothing
(``sim status`` printed "0 nodes" and exited 0 before)."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from gpupool.simcluster.models import SimulatedClusterState

pytestmark = pytest.mark.django_db

ACTIONS = [
    ["status"],
    ["clock"],
    ["clock", "--speed", "10"],
    ["node-down", "h100-0"],
    ["node-up", "h100-0"],
    ["cordon", "h100-0"],
    ["uncordon", "h100-0"],
    ["gpu-fail", "h100-0", "3", "--reason", "XID 79"],
    ["gpu-heal", "h100-0", "3"],
]


@pytest.mark.parametrize("args", ACTIONS, ids=lambda args: " ".join(args))
def test_every_action_refuses_on_a_cluster_that_is_not_simulated(
    args: list[str], settings: Any
) -> None:
    settings.GPUPOOL_CLUSTER = "kubernetes"
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("gpupool", "sim", *args, stdout=out, stderr=err)
    assert exit_.value.code == 2
    assert out.getvalue() == ""
    assert err.getvalue().startswith(
        f"gpupool sim {args[0]}: the configured cluster is 'kubernetes' (GPUPOOL_CLUSTER), "
        "not the simulated one"
    )
    assert not SimulatedClusterState.objects.exists()  # no simulated cluster was made


def test_on_the_simulated_cluster_the_status_still_answers(settings: Any) -> None:
    settings.GPUPOOL_CLUSTER = "simulated"
    out = StringIO()
    call_command("gpupool", "sim", "status", stdout=out, stderr=StringIO())
    assert "0 nodes; gpupool's pods: none" in out.getvalue()
