"""A quota request's refusal of its amounts is shown beside the amount it names (not pinned on
the first amount, Guarantee, with the others pointing there); one about the whole request
("levels already as they are") above the form.

The pool (``conftest``): h100 (exclusive: whole GPUs); nlp at 4 / 8 / 16; ``lena`` leads nlp.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpupool.dashboard.forms import QuotaRequestForm
from gpupool.quotas.models import QuotaRequest

pytestmark = pytest.mark.django_db


def post(pool: Any, page_as: Any, **levels: str) -> dict[str, list[str]]:
    """File nlp's h100 quota request at ``levels``; the form's errors by field ("__all__":
    above the form)."""
    data = {
        "kind": "queue-quota",
        "queue": pool.nlp_queue.pk,
        "flavor": pool.h100.pk,
        "justification": "the new model needs more GPUs",
    } | levels
    response = page_as("lena").post("/requests/", data)
    assert not QuotaRequest.objects.exists()
    return {name: list(found) for name, found in response.context["form"].errors.items()}


def test_a_capability_too_large_is_said_under_capability(pool: Any, page_as: Any) -> None:
    errors = post(pool, page_as, guarantee="1", deserved="2", capability="99999999")
    assert errors == {
        # (the form's bound, from the payload's limits, in its unit: the action's is the same)
        "capability": ["at most 9,999,999.999 GPUs or MIG instances"],
    }


def test_each_fraction_on_a_whole_gpu_flavor_is_said_under_its_own_amount(
    pool: Any, page_as: Any
) -> None:
    errors = post(pool, page_as, guarantee="2.5", deserved="2.5", capability="16")
    assert sorted(errors) == ["deserved", "guarantee"]
    assert errors["guarantee"][0].startswith("guarantee 2.5 is not a whole number: flavor h100")
    assert errors["deserved"][0].startswith("deserved 2.5 is not a whole number: flavor h100")
    assert len(errors["guarantee"]) == len(errors["deserved"]) == 1


def test_levels_already_as_they_are_are_said_above_the_form(pool: Any, page_as: Any) -> None:
    errors = post(pool, page_as, guarantee="4", deserved="8", capability="16")
    assert list(errors) == ["__all__"]
    assert errors["__all__"][0].startswith(
        "requested amounts: these are the queue's levels already"
    )


def test_a_guarantee_above_deserved_points_from_deserved_only(pool: Any, page_as: Any) -> None:
    errors = post(pool, page_as, guarantee="12", deserved="10", capability="16")
    assert errors == {
        "guarantee": ["Guarantee (12) must not exceed Deserved (10)"],
        "deserved": [f"see the error under {QuotaRequestForm.base_fields['guarantee'].label}"],
    }


def test_every_level_out_of_order_is_said_at_once_in_the_forms_words(
    pool: Any, page_as: Any
) -> None:
    # guarantee above deserved, and deserved above capability: both said on the first try,
    # each beside its lower level, the levels named as the form labels them
    errors = post(pool, page_as, guarantee="10", deserved="5", capability="3")
    assert errors == {
        "guarantee": ["Guarantee (10) must not exceed Deserved (5)"],
        "deserved": ["Deserved (5) must not exceed Capability (3)"],
        "capability": [f"see the error under {QuotaRequestForm.base_fields['deserved'].label}"],
    }
