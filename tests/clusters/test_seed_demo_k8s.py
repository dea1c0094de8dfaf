"""`gpupool seed-demo` with GPUPOOL_CLUSTER=kubernetes reads the inventory from the cluster, not
from the demo's node profile; on a pool the demo's quotas do not fit it says so, names the
profile to run on, and writes nothing."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from kubernetes import client

from gpupool.inventory.models import Node
from gpupool.quotas.models import Queue

pytestmark = [pytest.mark.k8s, pytest.mark.django_db]

ORG_H100_GUARANTEES = 200  # seed_demo.ORG_QUOTAS: research 100 + product 100


def test_seed_demo_on_kubernetes_reads_the_clusters_nodes_or_refuses_a_pool_too_small(
    k8s_scheduler_kubeconfig: Any, k8s_api: Any, settings: Any
) -> None:
    settings.GPUPOOL_CLUSTER = "kubernetes"
    settings.GPUPOOL_KUBECONFIG = str(k8s_scheduler_kubeconfig)
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    nodes = client.CoreV1Api(k8s_api).list_node().items
    h100 = {
        n.metadata.name: int(n.status.allocatable.get("nvidia.com/gpu", "0"))
        for n in nodes
        if (n.metadata.labels or {}).get("nvidia.com/gpu.product") == "NVIDIA-H100-80GB-HBM3"
    }
    out, err = StringIO(), StringIO()
    try:
        call_command("gpupool", "seed-demo", stdout=out, stderr=err)
        status = 0
    except SystemExit as exit:
        status = int(exit.code or 0)
    if sum(h100.values()) < ORG_H100_GUARANTEES:  # the default profile's 4 H100 nodes
        assert status == 2, out.getvalue()
        message = err.getvalue()
        assert "does not fit this cluster" in message and "h100" in message
        assert "profile `demo`" in message and "make demo-k8s" in message
        assert not Node.objects.exists() and not Queue.objects.exists()  # nothing written
    else:  # a plane large enough: its H100 nodes, not the profile's 40
        assert status == 0, err.getvalue()
        assert set(Node.objects.filter(flavor__name="h100").values_list("name", flat=True)) == set(
            h100
        )
