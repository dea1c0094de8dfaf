"""Walk-through E: a lead who asks for more than a request can hold is told the bound, in the
field's unit, beside the field: "GPU-hours to add: at most 99,999,999.999 GPU-hours". The form
said Django's "Ensure that there are no more than 12 digits in total.", which named neither
the bound nor the unit (and counted the decimals in); an amount with too many decimals reads
"at most 3 decimal places". Nothing is filed, and what was typed stays in the form."""

from __future__ import annotations

from typing import Any

import pytest
from domain_builders import period_fields

from gpupool.quotas.models import PriorityClass, QuotaRequest

pytestmark = pytest.mark.django_db


def errors_of(response: Any, field: str) -> list[str]:
    return list(response.context["form"].errors.get(field, []))


def test_too_many_gpu_hours_are_refused_with_the_bound_and_unit(pool: Any, page_as: Any) -> None:
    typed = "99999999999999999"
    response = page_as("lena").post(
        "/requests/",
        {
            "kind": "budget",
            "tenant": pool.nlp.pk,
            "priority_class": PriorityClass.objects.get(name="high").pk,
            **period_fields(),
            "gpu_hours": typed,
            "justification": "the whole pool, forever",
        },
    )
    assert response.status_code == 400
    assert errors_of(response, "gpu_hours") == ["at most 99,999,999.999 GPU-hours"]
    assert "Ensure" not in response.content.decode()
    assert f'value="{typed}"' in response.content.decode()
    assert not QuotaRequest.objects.exists()


def test_a_guarantee_too_large_or_too_precise_is_refused_in_the_forms_words(
    pool: Any, page_as: Any
) -> None:
    response = page_as("lena").post(
        "/requests/",
        {
            "kind": "queue-quota",
            "queue": pool.nlp_queue.pk,
            "flavor": pool.h100.pk,
            "guarantee": "123456789012",
            "deserved": "10.12345",
            "capability": "16",
            "justification": "more",
        },
    )
    assert response.status_code == 400
    assert errors_of(response, "guarantee") == ["at most 9,999,999.999 GPUs or MIG instances"]
    assert errors_of(response, "deserved") == ["at most 3 decimal places"]
    assert "Ensure" not in response.content.decode()
    assert not QuotaRequest.objects.exists()
