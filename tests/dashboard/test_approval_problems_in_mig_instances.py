"""A quota request's problems (the approval page's "does it fit?", the API's impact) say a
MIG flavor's guarantees and the pool's healthy capacity of it in MIG instances, as the rest of
the page does (``inventory.units``); an h100 request's stay GPUs. The impact's numbers are
unchanged.

The pool: the page tests' h100 nodes (15 healthy GPUs) and MIG node m1 of flavor
``a100-3g.40gb``: 8 A100 cards of two 3g.40gb instances each, so 16 healthy MIG instances;
nlp and vision each hold a quota of 4 / 8 / 16 of both flavors."""

from __future__ import annotations

from typing import Any

import pytest
from domain_builders import MIG_FLAVOR, mig_beside
from two_teams import quota_request

from gpupool.inventory.models import Flavor
from gpupool.quotas.impact import request_impact

pytestmark = pytest.mark.django_db

MIG = MIG_FLAVOR


@pytest.fixture
def mig_pool(pool: Any) -> Any:
    mig_beside(pool)
    return pool


def too_much(pool: Any, of: str) -> list[str]:
    """The problems of nlp's request for a guarantee of 14 of ``of`` (vision holds 4)."""
    request = quota_request(
        pool, flavor=Flavor.objects.get(name=of), justification="more", guarantee=14, deserved=14
    )
    return request_impact(request).problems


def test_a_mig_requests_problems_count_mig_instances(mig_pool: Any, page_as: Any) -> None:
    [mig] = too_much(mig_pool, MIG)
    assert (
        f"would total 18 MIG instances, more than the pool's 16 healthy {MIG} MIG instances" in mig
    )
    assert f"nlp can hold a guarantee of at most 12 {MIG} MIG instances" in mig
    assert "GPU" not in mig
    [h100] = too_much(mig_pool, "h100")
    assert "would total 18 GPUs, more than the pool's 15 healthy h100 GPUs" in h100
