"""Walk s25: a lead who typed too large a quota level was told two different things for the
same mistake -- "guarantee must be at most 9999999.999, not '12345678'" for 8 digits, and
Django's "Ensure that there are no more than 12 digits in total." for 17 --, and a member's
expected runtime of "1e30" hours got both "at most 8784 hours ..." and "Ensure that there are
no more than 8 digits in total.". Each field now says its bound once, in the pages' number
format."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import field_errors, text
from django.core.exceptions import ValidationError

from gpupool.dashboard.forms import QuotaRequestForm, WorkloadForm
from gpupool.quotas.models import QuotaRequest


def refusal(field: Any, value: str) -> list[str]:
    """What a form field says of ``value``."""
    with pytest.raises(ValidationError) as refused:
        field.clean(value)
    return list(refused.value.messages)


@pytest.mark.parametrize("value", ["12345678", "99999999999999999", "1e30"])
@pytest.mark.parametrize("name", ["guarantee", "deserved", "capability"])
def test_a_quota_level_too_large_says_the_largest_once(name: str, value: str) -> None:
    assert refusal(QuotaRequestForm.base_fields[name], value) == [
        "at most 9,999,999.999 GPUs or MIG instances"
    ]


@pytest.mark.parametrize("value", ["123456789", "99999999999999999"])
def test_gpu_hours_too_many_say_the_largest_once(value: str) -> None:
    field = QuotaRequestForm.base_fields["gpu_hours"]
    assert refusal(field, value) == ["at most 99,999,999.999 GPU-hours"]


def test_an_expected_runtime_too_long_says_its_bound_once() -> None:
    field = WorkloadForm.base_fields["expected_hours"]
    messages = refusal(field, "1e30")
    assert len(messages) == 1 and messages[0].startswith("at most 8784 hours")


def test_the_lead_sees_the_bound_beside_the_level_and_nothing_is_filed(
    pool: Any, page_as: Any
) -> None:
    ask = {
        "kind": "queue-quota",
        "queue": pool.nlp_queue.pk,
        "flavor": pool.h100.pk,
        "guarantee": "99999999999999999",
        "deserved": "10",
        "capability": "16",
        "justification": "more",
    }
    page = text(page_as("lena").post("/requests/", ask))
    assert "at most 9,999,999.999" in field_errors(page, "guarantee")
    assert "digits in total" not in page
    assert 'value="99999999999999999"' in page  # what was typed stays
    assert not QuotaRequest.objects.exists()
