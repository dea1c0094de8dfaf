"""The what-if's result on the request page says how many GPUs other schedulers' pods held
(counted as taken in both replays: ``foreign_gpus``), and says nothing when none did."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import text
from django.utils import timezone
from test_requests_and_approvals import dispatched, filed  # noqa: F401 (a fixture)

from gpupool.quotas.actions import do_begin_what_if, do_finish_what_if
from gpupool.quotas.models import WhatIfRun


@pytest.mark.usefixtures("dispatched")  # the what-if runs are the test's to drive
@pytest.mark.parametrize(("held", "said"), [(16, "16 GPUs held"), (1, "1 GPU held"), (0, None)])
def test_the_result_says_what_other_schedulers_held(
    pool: Any, page_as: Any, held: int, said: str | None
) -> None:
    request = filed(pool)
    client = page_as("ada")
    client.post(f"/approvals/{request.pk}/what-if/", {"days": "7"})
    run = do_begin_what_if(WhatIfRun.objects.get().pk, at=timezone.now())
    assert run is not None
    do_finish_what_if(run, at=timezone.now(), result={"jobs": 3, "foreign_gpus": held})
    page = text(client.get(f"/approvals/{request.pk}/what-if/"))
    assert "replayed 3 workloads" in page
    if said is None:
        assert "other schedulers" not in page
    else:
        assert f"{said} by other schedulers' pods" in page
        assert "counted as taken in both replays" in page
