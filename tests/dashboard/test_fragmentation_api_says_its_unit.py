"""The fragmentation API says, per flavor, the unit its amounts count (``unit``: "GPU", or a
MIG flavor's "MIG instance"), by the pages' one rule (``inventory.units.flavor_unit``); the
fields keep their ``gpus`` names, and their help texts say the amounts are in that unit.

The pool (``conftest``): h100 nodes n1 (8 GPUs, one broken) and n2 (8), and MIG node m1 of
flavor ``a100-3g.40gb``: 8 A100 cards of two 3g.40gb instances each, card 5 broken, so 14
healthy MIG instances."""

from __future__ import annotations

from typing import Any

import pytest
from domain_builders import flavor, node
from rest_framework.test import APIClient

from gpupool.control.api import FlavorFragmentationSerializer, GangFitSerializer
from gpupool.inventory.models import Flavor
from gpupool.inventory.units import flavor_unit

pytestmark = pytest.mark.django_db

MIG = "a100-3g.40gb"


def test_each_flavor_says_its_unit_and_a_mig_flavor_counts_mig_instances(pool: Any) -> None:
    mig = flavor(MIG, sharing="mig", gpu_model="A100-80GB", mig_profile="3g.40gb", gpu_memory_gb=40)
    node("m1", mig, gpus=8, mig_layout={"3g.40gb": 2}, unhealthy_gpus={5: "XID 79"})
    client = APIClient()
    client.force_authenticate(pool.users["vic"])
    response = client.get("/api/v1/fragmentation/")
    assert response.status_code == 200, response.content
    figures = {row["flavor"]: row for row in response.json()["flavors"]}
    assert (figures[MIG]["unit"], figures[MIG]["healthy_gpus"]) == ("MIG instance", 14)
    assert (figures["h100"]["unit"], figures["h100"]["healthy_gpus"]) == ("GPU", 15)
    for name, row in figures.items():  # the pages' rule, not a second copy of it
        assert row["unit"] == flavor_unit(Flavor.objects.get(name=name).sharing)


def test_the_amounts_help_texts_say_they_are_in_the_flavor_s_unit() -> None:
    flavor_fields = FlavorFragmentationSerializer().fields
    gang_fields = GangFitSerializer().fields
    amounts = [
        *(flavor_fields[name] for name in ("healthy_gpus", "free_gpus", "fragmented_gpus")),
        *(flavor_fields[name] for name in ("stranded_gpus", "largest_gang_gpus")),
        gang_fields["gpus"],
        gang_fields["gpus_per_pod"],
    ]
    for field in amounts:
        assert "in the flavor's unit" in str(field.help_text), field.field_name
