"""A pod set's command or environment past its bound is refused by the submission action (the
model's own check, ``PodSet.clean``) in the words the API says it with: "at most 256 entries,
not 257", "at most 256 variables, not 1,000" (``text_limits.too_many``), naming the field."""

from typing import Any

import pytest
from django.core.exceptions import ValidationError
from domain_builders import node
from two_teams import two_teams

from gpupool.inventory.models import Flavor
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import MAX_COMMAND_ITEMS, MAX_ENV_VARS, Workload

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("changes", "field", "said"),
    [
        (
            {"command": ["x"] * (MAX_COMMAND_ITEMS + 1)},
            "pod_sets.0.command",
            f"at most {MAX_COMMAND_ITEMS} entries, not {MAX_COMMAND_ITEMS + 1}",
        ),
        (
            {"env": {f"V{n}": "1" for n in range(1_000)}},
            "pod_sets.0.env",
            f"at most {MAX_ENV_VARS} variables, not 1,000",
        ),
    ],
    ids=["a command", "an environment"],
)
def test_a_list_past_its_bound_is_refused_in_the_products_words(
    changes: dict[str, Any], field: str, said: str
) -> None:
    pool = two_teams(lambda h100: node("n1", h100, gpus=8), ("max", "lena", "vera", "fin"))
    h100 = Flavor.objects.get(name="h100")
    spec = PodSetSpec(1, gpus=1, flavor=h100, image="python:3.12", **changes)
    with pytest.raises(ValidationError) as refusal:
        do_submit_workload(
            "bert", queue=pool.nlp_queue, pod_sets=[spec], submitter=pool.users["max"]
        )
    assert refusal.value.message_dict == {field: [said]}
    assert not Workload.objects.exists()
