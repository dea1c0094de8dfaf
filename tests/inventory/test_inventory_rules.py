"""Flavors, nodes and GPUs: each rule refuses bad input with a message naming the field."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from domain_builders import flavor, node

from gpupool.inventory.actions import do_set_gpu_health, do_set_node_cordoned, do_sync_node
from gpupool.inventory.models import Flavor, Gpu, Node, healthy_capacity

pytestmark = pytest.mark.django_db


def mig_flavor(**fields: object) -> Flavor:
    values = {"sharing": "mig", "gpu_model": "A100-80GB", "mig_profile": "3g.40gb"}
    values |= {"gpu_memory_gb": 40} | fields
    return flavor("a100-3g.40gb", **values)


def test_a_mig_flavor_with_a_known_profile_is_accepted() -> None:
    made = mig_flavor()
    assert made.name == "a100-3g.40gb"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"mig_profile": "3g.20gb", "gpu_memory_gb": 20}, "mig_profile"),
        ({"gpu_model": "A100-PCIE-13GB"}, "gpu_model"),
        ({"gpu_memory_gb": 80}, "gpu_memory_gb"),
    ],
    ids=["unknown profile for the card", "card without a MIG table", "memory not the profile's"],
)
def test_a_bad_mig_flavor_is_refused_naming_the_field(
    fields: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError) as error:
        mig_flavor(**fields)
    assert field in error.value.message_dict


def test_only_mig_flavors_have_a_profile() -> None:
    with pytest.raises(ValidationError) as error:
        flavor("h100", mig_profile="3g.40gb")
    assert "mig_profile" in error.value.message_dict


def test_the_database_refuses_a_mig_flavor_without_profile() -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Flavor.objects.create(
            name="broken", sharing="mig", gpu_memory_gb=40, hourly_price=Decimal(1)
        )


def test_a_negative_price_is_refused_by_validation_and_database() -> None:
    with pytest.raises(ValidationError) as error:
        flavor("h100", hourly_price=Decimal("-1"))
    assert "hourly_price" in error.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        Flavor.objects.create(name="cheap", gpu_memory_gb=80, hourly_price=Decimal("-1"))


def test_node_labels_must_map_names_to_strings() -> None:
    with pytest.raises(ValidationError) as error:
        flavor("h100", node_labels={"nvidia.com/gpu.product": 7})
    assert "node_labels" in error.value.message_dict


def test_syncing_a_node_creates_its_gpus_one_by_one_with_health() -> None:
    h100 = flavor()
    made = node("n1", h100, gpus=8, unhealthy_gpus=[3])
    assert [gpu.index for gpu in made.gpus.all()] == list(range(8))
    assert [gpu.index for gpu in made.gpus.filter(healthy=False)] == [3]
    # a node outside any clique is its own NVLink domain
    assert made.nvlink_domain == "n1"
    # re-syncing with fewer GPUs and new health updates the rows in place
    node("n1", h100, gpus=4)
    assert list(Gpu.objects.filter(node=made).values_list("index", "healthy")) == [
        (0, True),
        (1, True),
        (2, True),
        (3, True),
    ]


def test_an_unhealthy_index_outside_the_node_is_refused() -> None:
    with pytest.raises(ValidationError) as error:
        node("n1", flavor(), gpus=4, unhealthy_gpus=[4])
    assert "unhealthy_gpus" in error.value.message_dict
    assert not Node.objects.exists()


def test_an_nvlink_domain_holds_one_flavor() -> None:
    node("gb-1", flavor("gb200"), gpus=4, nvlink_domain="nvl72-a")
    with pytest.raises(ValidationError) as error:
        node("h-1", flavor("h100"), gpus=8, nvlink_domain="nvl72-a")
    assert "nvlink_domain" in error.value.message_dict


def test_a_mig_node_needs_a_valid_layout_with_the_flavor_profile() -> None:
    a100 = mig_flavor()
    with pytest.raises(ValidationError) as error:
        node("m1", a100, gpus=8, mig_layout={"3g.40gb": 3})
    assert "mig_layout" in error.value.message_dict
    with pytest.raises(ValidationError) as error:
        node("m1", a100, gpus=8, mig_layout={"7g.80gb": 1})
    assert "no 3g.40gb instance" in error.value.message_dict["mig_layout"][0]
    made = node("m1", a100, gpus=8, mig_layout={"3g.40gb": 2})
    assert made.devices_per_gpu() == 2


def test_only_mig_nodes_have_a_layout() -> None:
    with pytest.raises(ValidationError) as error:
        node("n1", flavor(), gpus=8, mig_layout={"3g.40gb": 2})
    assert "mig_layout" in error.value.message_dict


def test_healthy_capacity_counts_healthy_gpus_on_uncordoned_nodes_and_mig_instances() -> None:
    h100 = flavor()
    node("n1", h100, gpus=8, unhealthy_gpus=[0, 1])
    do_set_node_cordoned(node("n2", h100, gpus=8), cordoned=True, acting_user=None)
    assert healthy_capacity(h100) == 6
    a100 = mig_flavor()
    node("m1", a100, gpus=8, mig_layout={"3g.40gb": 2})
    assert healthy_capacity(a100) == 16
    do_set_gpu_health(
        Gpu.objects.get(node__name="m1", index=0), healthy=False, reason="XID 79", acting_user=None
    )
    assert healthy_capacity(a100) == 14


def test_the_database_refuses_two_gpus_with_one_index() -> None:
    made = node("n1", flavor(), gpus=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Gpu.objects.create(node=made, index=0)


def test_a_sync_refused_by_validation_leaves_no_node_and_no_gpus() -> None:
    node("gb-1", flavor("gb200"), gpus=4, nvlink_domain="nvl72-a")
    h100 = flavor("h100")
    with pytest.raises(ValidationError):
        do_sync_node("h-1", flavor=h100, gpus=8, cpu=1, memory_gb=1, nvlink_domain="nvl72-a")
    assert not Node.objects.filter(name="h-1").exists()
    assert not Gpu.objects.filter(node__name="h-1").exists()
