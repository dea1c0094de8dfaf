"""A flavor keeps its name, and what a pod set or placement on it means (whole GPUs or milli
shares, which MIG instance), while unfinished work asks for it: such a change is refused naming
the field, and the flavor is left as it was. Price, labels and description may change."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone
from domain_builders import flavor, node, priority_class, queue, user
from rest_framework.test import APIClient

from gpupool.inventory.actions import do_save_flavor
from gpupool.inventory.models import Flavor
from gpupool.quotas.models import Queue
from gpupool.workloads.actions import (
    PlacementSpec,
    PodSetSpec,
    do_submit_workload,
    do_transition_workload,
)
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_api() -> APIClient:
    client = APIClient()
    client.force_authenticate(user("ada", admin=True))
    return client


@pytest.fixture
def h100() -> Flavor:
    """Exclusive flavor h100 with node n1, the default class, and leaf queue train."""
    made = flavor("h100")
    node("n1", made, gpus=8)
    priority_class("normal", default=True)
    queue("train", parent=queue("root"))
    return made


def submit(of: Flavor, name: str = "big") -> Workload:
    spec = PodSetSpec(1, gpus=4, flavor=of)
    return do_submit_workload(name, queue=Queue.objects.get(name="train"), pod_sets=[spec])


def run(workload: Workload) -> None:
    now = timezone.now()
    spot = PlacementSpec("main", 0, workload.pod_sets.get().flavor.nodes.get(), [0, 1, 2, 3])
    do_transition_workload(workload, "admitted", reason="fits", at=now, placements=[spot])
    do_transition_workload(workload, "running", reason="started", at=now)


def test_sharing_of_a_flavor_with_placed_work_is_refused_naming_sharing(
    admin_api: APIClient, h100: Flavor
) -> None:
    # given whole-GPU work running on h100
    run(submit(h100))
    # when an admin makes h100 shared
    response = admin_api.patch("/api/v1/flavors/h100/", {"sharing": "shared"}, format="json")
    # then it is refused naming the field, and h100 stays exclusive
    assert response.status_code == 400, response.content
    assert "unfinished workload" in response.json()["error"]["fields"]["sharing"][0]
    assert Flavor.objects.get(name="h100").sharing == "exclusive"


def test_sharing_of_a_flavor_pending_work_asks_for_is_refused(h100: Flavor) -> None:
    submit(h100)
    h100.sharing = "shared"
    with pytest.raises(ValidationError) as error:
        do_save_flavor(h100, acting_user=None)
    assert "default/big" in error.value.message_dict["sharing"][0]


def test_the_mig_profile_of_a_used_flavor_is_refused_naming_mig_profile(
    admin_api: APIClient,
) -> None:
    mig = flavor(
        "a100-3g.40gb",
        sharing="mig",
        gpu_model="A100-80GB",
        mig_profile="3g.40gb",
        gpu_memory_gb=40,
    )
    priority_class("normal", default=True)
    queue("train")
    spec = PodSetSpec(1, gpus=1, flavor=mig)
    do_submit_workload("small", queue=Queue.objects.get(name="train"), pod_sets=[spec])
    response = admin_api.patch(
        "/api/v1/flavors/a100-3g.40gb/",
        {"mig_profile": "2g.20gb", "gpu_memory_gb": 20},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "mig_profile" in response.json()["error"]["fields"]
    assert Flavor.objects.get(name="a100-3g.40gb").mig_profile == "3g.40gb"


def test_price_and_description_of_a_used_flavor_still_change(
    admin_api: APIClient, h100: Flavor
) -> None:
    run(submit(h100))
    response = admin_api.patch(
        "/api/v1/flavors/h100/", {"hourly_price": "3.1", "description": "SXM"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert Flavor.objects.get(name="h100").hourly_price == Decimal("3.1")


def test_sharing_changes_once_the_work_has_finished(h100: Flavor) -> None:
    work = submit(h100)
    do_transition_workload(work, "cancelled", reason="not needed", at=timezone.now())
    h100.sharing = "shared"
    assert do_save_flavor(h100, acting_user=None).sharing == "shared"


def test_renaming_a_flavor_is_refused_naming_name(admin_api: APIClient, h100: Flavor) -> None:
    response = admin_api.patch("/api/v1/flavors/h100/", {"name": "h100-sxm"}, format="json")
    assert response.status_code == 400, response.content
    assert "cannot be changed" in response.json()["error"]["fields"]["name"][0]
    assert list(Flavor.objects.values_list("name", flat=True)) == ["h100"]
