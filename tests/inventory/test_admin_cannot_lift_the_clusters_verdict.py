"""Finding 2 through the Django admin: its GPU form sets its copy of the GPU healthy before the
action runs, so a check on the caller's copy let a GPU the cluster leaves out of allocatable
be marked healthy there. The action reads the stored mark; the admin's bulk "Mark selected
GPUs healthy" marks the others and says which it could not."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse
from domain_builders import flavor, node

from gpupool.control.snapshot import CLUSTER_UNHEALTHY
from gpupool.inventory.actions import do_set_gpu_health
from gpupool.inventory.models import Gpu

pytestmark = pytest.mark.django_db


def test_the_action_reads_the_stored_mark_not_a_forms_copy() -> None:
    made = node("n1", flavor(), gpus=4, unhealthy_gpus={2: CLUSTER_UNHEALTHY})
    gpu = made.gpus.get(index=2)
    gpu.healthy, gpu.unhealthy_reason = True, ""  # as the admin's form leaves its copy
    with pytest.raises(ValidationError) as refused:
        do_set_gpu_health(gpu, healthy=True, acting_user=None)
    assert "healthy" in refused.value.message_dict
    assert not Gpu.objects.get(pk=gpu.pk).healthy


def test_the_bulk_action_marks_the_others_and_names_the_refused(admin_client: Client) -> None:
    made = node("n1", flavor(), gpus=4, unhealthy_gpus={1: "XID 79", 2: CLUSTER_UNHEALTHY})
    picked = [str(pk) for pk in made.gpus.filter(index__in=[1, 2]).values_list("pk", flat=True)]
    response = admin_client.post(
        reverse("admin:inventory_gpu_changelist"),
        {"action": "mark_healthy", "_selected_action": picked},
        follow=True,
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "1 GPUs marked healthy" in page
    assert "GPU 2 of n1 is not allocatable in the cluster" in page
    assert list(made.gpus.filter(healthy=False).values_list("index", flat=True)) == [2]
