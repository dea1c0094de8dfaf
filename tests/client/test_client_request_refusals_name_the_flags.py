"""``gpupool request quota`` / ``request budget`` name the flag a refusal of the server is
about (``--flavor: ...``), as the client's own checks of those flags do; they named the
API's field (``flavor: ...``), which the user never typed (more cases:
``test_client_requests.test_a_refusal_of_the_api_is_printed_with_its_field``)."""

from __future__ import annotations

from typing import Any

import pytest
from test_client_requests import QUOTA, as_user, pool  # noqa: F401 - the fixtures

from gpupool.client.main import REQUEST_FLAGS
from gpupool.quotas.models import QuotaRequest
from gpupool.quotas.requests_api import QuotaRequestSerializer

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_flavor_unknown_is_refused_naming_flavor(as_user: Any) -> None:  # noqa: F811
    quota = list(QUOTA)
    quota[quota.index("h100")] = "nosuch"
    status, out, err = as_user("lena", *quota)
    assert (status, out) == (1, "")
    assert err.startswith("gpupool: --flavor: ")
    assert not QuotaRequest.objects.exists()


def test_every_flag_names_a_field_the_api_takes() -> None:
    fields = set(QuotaRequestSerializer().fields)
    amounts = {"guarantee", "deserved", "capability", "gpu_hours"}  # the payload's
    named = {name.removeprefix("payload.") for name in REQUEST_FLAGS} - amounts
    assert named <= fields and "payload" in fields
