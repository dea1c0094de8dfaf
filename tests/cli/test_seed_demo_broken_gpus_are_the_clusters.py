"""Finding 2 on `make demo`'s path: seed-demo records the demo's broken GPUs as the cluster's
verdict, as the loop's sync records a GPU ``gpupool sim gpu-fail`` breaks, with the health
source's reason on top (``demo.record_gpu_findings``, the plane's path too). An admin cannot
mark h100-07's GPU 3 healthy while the simulated cluster leaves it out of allocatable: the
API answers 400 naming ``healthy`` and the GPU stays out of the pool's healthy capacity."""

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from gpupool.cli.subcommands.seed_demo import UNHEALTHY_GPUS
from gpupool.clusters.simulated import SimulatedBackend
from gpupool.control.loop import ControlLoop
from gpupool.control.snapshot import CLUSTER_UNHEALTHY
from gpupool.inventory.models import Flavor, Gpu, healthy_capacity
from gpupool.simcluster.store import open_simulated_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_a_seeded_broken_gpu_cannot_be_marked_healthy_and_keeps_its_reason() -> None:
    call_command("gpupool", "seed-demo", stdout=StringIO())
    result = ControlLoop(SimulatedBackend(open_simulated_cluster())).run_cycle()
    assert result.status == "succeeded", result.error
    gpu = Gpu.objects.get(node__name="h100-07", index=3)
    assert (gpu.healthy, gpu.unhealthy_reason) == (False, UNHEALTHY_GPUS["h100-07"][3])
    assert gpu.unhealthy_reason != CLUSTER_UNHEALTHY

    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    response = client.post(
        "/api/v1/nodes/h100-07/gpus/3/health/",
        {"healthy": True, "reason": ""},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"]["message"].startswith("healthy: ")
    assert not Gpu.objects.get(pk=gpu.pk).healthy
    assert healthy_capacity(Flavor.objects.get(name="h100")) == 318


def test_a_gpu_broken_with_sim_gpu_fail_shows_its_reason_and_stays_the_clusters() -> None:
    """Finding 16: ``sim gpu-fail --reason`` reaches the inventory as the seeded GPUs' reasons
    do (one path, ``demo.record_gpu_findings``): the Cluster page and the API say it, and the
    GPU stays the cluster's verdict (it cannot be marked healthy while it is left out)."""
    call_command("gpupool", "seed-demo", stdout=StringIO())
    loop = ControlLoop(SimulatedBackend(open_simulated_cluster()))
    assert loop.run_cycle().status == "succeeded"
    reason = "XID 48: double-bit ECC error"
    call_command(
        "gpupool", "sim", "gpu-fail", "h100-03", "2", "--reason", reason, stdout=StringIO()
    )
    assert loop.run_cycle().status == "succeeded"
    gpu = Gpu.objects.get(node__name="h100-03", index=2)
    assert (gpu.healthy, gpu.unhealthy_reason) == (False, reason)
    assert gpu.reported_by_cluster
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    node = client.get("/api/v1/nodes/h100-03/").json()
    assert reason in str(node)
    assert reason in client.get("/cluster/?flavor=h100&show=problems").content.decode()
