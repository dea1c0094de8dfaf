"""A pod set may list further flavors after its first: ordered, existing, once each, one kind."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.test import Client
from django.urls import reverse
from domain_builders import flavor, priority_class, queue, user

from gpupool.inventory.models import Flavor
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import PodSet, PodSetFlavorChoice, Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool() -> dict[str, object]:
    root = queue("root")
    priority_class("normal", default=True)
    return {
        "h100": flavor("h100"),
        "a100": flavor("a100", gpu_memory_gb=40),
        "h200": flavor("h200", gpu_memory_gb=141),
        "l40s": flavor("l40s", sharing="shared", gpu_memory_gb=48),
        "l4": flavor("l4", sharing="shared", gpu_memory_gb=24),
        "team": queue("team", parent=root),
    }


def submit(pool: dict, spec: PodSetSpec) -> Workload:
    return do_submit_workload("w1", queue=pool["team"], pod_sets=[spec])


def test_choices_are_kept_in_order_after_the_first_flavor(pool: dict) -> None:
    # given a pod set preferring h100, then h200, then a100
    spec = PodSetSpec(2, gpus=8, flavor=pool["h100"], flavor_choices=[pool["h200"], pool["a100"]])
    # when it is submitted
    made = submit(pool, spec)
    # then the order survives, and `flavor` is still the first choice
    pod_set = made.pod_sets.get()
    assert pod_set.flavor == pool["h100"]
    assert pod_set.flavor_names() == ("h100", "h200", "a100")
    assert list(pod_set.flavor_choices.values_list("rank", flat=True)) == [1, 2]


def test_a_single_flavor_pod_set_has_no_choice_rows(pool: dict) -> None:
    made = submit(pool, PodSetSpec(1, gpus=1, flavor=pool["h100"]))
    assert made.pod_sets.get().flavor_names() == ("h100",)
    assert not PodSetFlavorChoice.objects.exists()


def test_shared_choices_with_a_gpu_fraction_are_accepted(pool: dict) -> None:
    spec = PodSetSpec(1, gpus=1, gpu_milli=470, flavor=pool["l40s"], flavor_choices=[pool["l4"]])
    assert submit(pool, spec).pod_sets.get().flavor_names() == ("l40s", "l4")


def _unsaved() -> Flavor:
    return Flavor(name="ghost", gpu_memory_gb=80, hourly_price=Decimal(1))


BAD = [
    (
        "a repeated choice",
        lambda p: PodSetSpec(1, gpus=1, flavor=p["h100"], flavor_choices=[p["a100"], p["a100"]]),
        "repeated: a100",
    ),
    (
        "the first flavor again",
        lambda p: PodSetSpec(1, gpus=1, flavor=p["h100"], flavor_choices=[p["h100"]]),
        "repeated: h100",
    ),
    (
        "a flavor that does not exist",
        lambda p: PodSetSpec(1, gpus=1, flavor=p["h100"], flavor_choices=[_unsaved()]),
        "unknown flavors: ghost",
    ),
    (
        "a shared choice after an exclusive flavor",
        lambda p: PodSetSpec(1, gpus=1, flavor=p["h100"], flavor_choices=[p["l40s"]]),
        "every choice must be too",
    ),
    (
        "an exclusive choice for a GPU fraction",
        lambda p: PodSetSpec(
            1, gpus=1, gpu_milli=500, flavor=p["l40s"], flavor_choices=[p["h100"]]
        ),
        "gpu_milli",
    ),
    (
        "choices on a CPU-only pod set",
        lambda p: PodSetSpec(1, cpu=4, flavor_choices=[p["h100"]]),
        "asks for GPUs",
    ),
]


@pytest.mark.parametrize(("name", "make", "why"), BAD, ids=[case[0] for case in BAD])
def test_bad_choices_are_refused_naming_the_field_and_nothing_is_saved(
    pool: dict, name: str, make: object, why: str
) -> None:
    with pytest.raises(ValidationError) as error:
        submit(pool, make(pool))  # type: ignore[operator]
    assert why in " ".join(error.value.message_dict["pod_sets.0.flavor_choices"])
    assert not Workload.objects.exists()
    assert not PodSet.objects.exists()
    assert not PodSetFlavorChoice.objects.exists()


def test_the_database_refuses_a_flavor_chosen_twice_or_rank_zero(pool: dict) -> None:
    made = submit(pool, PodSetSpec(1, gpus=1, flavor=pool["h100"], flavor_choices=[pool["a100"]]))
    pod_set = made.pod_sets.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        PodSetFlavorChoice.objects.create(pod_set=pod_set, rank=2, flavor=pool["a100"])
    with pytest.raises(IntegrityError), transaction.atomic():
        PodSetFlavorChoice.objects.create(pod_set=pod_set, rank=0, flavor=pool["h200"])


def test_a_chosen_flavor_cannot_be_deleted(pool: dict) -> None:
    submit(pool, PodSetSpec(1, gpus=1, flavor=pool["h100"], flavor_choices=[pool["a100"]]))
    with pytest.raises(Exception, match="protected"):
        pool["a100"].delete()


def test_the_admin_shows_the_flavors_in_order(pool: dict, client: Client) -> None:
    made = submit(
        pool,
        PodSetSpec(1, gpus=1, flavor=pool["h100"], flavor_choices=[pool["h200"], pool["a100"]]),
    )
    superuser = user("root", admin=True)
    superuser.is_staff = superuser.is_superuser = True
    superuser.save()
    client.force_login(superuser)
    response = client.get(reverse("admin:workloads_workload_change", args=[made.pk]))
    assert response.status_code == 200
    assert "h100 \u2192 h200 \u2192 a100" in response.content.decode()
