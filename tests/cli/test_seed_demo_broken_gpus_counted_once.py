"""`make demo`'s path: after `gpupool seed-demo` the control loop's sync keeps the demo's two
broken GPUs as they are, each once at its own index (h100-07 GPU 3, h100-23 GPU 5), so the
pool counts the healthy H100 capacity the simulated cluster offers (320 - 2 = 318)."""

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from gpupool.clusters.simulated import SimulatedBackend
from gpupool.control.loop import ControlLoop
from gpupool.inventory.models import Flavor, Gpu, healthy_capacity
from gpupool.simcluster.store import open_simulated_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def broken() -> dict[str, list[int]]:
    """Unhealthy GPUs in gpupool's books, by node."""
    found: dict[str, list[int]] = {}
    for name, index in Gpu.objects.filter(healthy=False).values_list("node__name", "index"):
        found.setdefault(name, []).append(index)
    return {name: sorted(indices) for name, indices in sorted(found.items())}


def test_the_loop_keeps_the_seeded_broken_gpus_once_at_their_indices() -> None:
    call_command("gpupool", "seed-demo", stdout=StringIO())
    cluster = open_simulated_cluster()
    in_cluster = {
        node.name: sorted(cluster.unhealthy_gpus(node.name))
        for node in cluster.nodes()
        if cluster.unhealthy_gpus(node.name)
    }
    assert in_cluster == {"h100-07": [3], "h100-23": [5]}
    assert broken() == in_cluster
    result = ControlLoop(SimulatedBackend(cluster)).run_cycle()
    assert result.status == "succeeded", result.error
    assert broken() == in_cluster
    assert healthy_capacity(Flavor.objects.get(name="h100")) == 318
