"""API errors are retried as the API documents: 5xx and the server's own 429, never a budget's."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from gpupool.clusters.kubernetes import (
    RetryPolicy,
    call_with_retries,
    is_budget_refusal,
    is_retriable,
    status_message,
)

POLICY = RetryPolicy(attempts=4, initial_delay_s=0.1, max_delay_s=1.0, max_retry_after_s=5.0)


def api_error(
    status: int, message: str = "", causes: list[dict[str, str]] | None = None,
    retry_after: str | None = None,
) -> ApiException:  # fmt: skip
    """An ApiException as the client raises it, with a Status body."""
    exc = ApiException(status=status, reason="reason")
    body: dict[str, object] = {"kind": "Status", "message": message, "code": status}
    if causes:
        body["details"] = {"causes": causes}
    exc.body = json.dumps(body)
    exc.headers = {"Retry-After": retry_after} if retry_after else {}
    return exc


BUDGET = api_error(
    429,
    "Cannot evict pod as it would violate the pod's disruption budget.",
    [{"reason": "DisruptionBudget", "message": "The disruption budget pdb needs 1 healthy pods"}],
)


def failing(errors: list[BaseException], result: str = "ok") -> Callable[[], str]:
    """A call that raises the given errors in turn, then answers."""
    remaining = list(errors)

    def call() -> str:
        if remaining:
            raise remaining.pop(0)
        return result

    return call


@pytest.mark.parametrize(
    ("error", "retriable"),
    [
        (api_error(500), True),
        (api_error(503), True),
        (api_error(429, "Too many requests", retry_after="1"), True),
        (BUDGET, False),
        (api_error(409, "already assigned"), False),
        (api_error(404), False),
        (api_error(500, "This pod has more than one PodDisruptionBudget"), False),
        (urllib3.exceptions.ProtocolError("connection reset"), True),
        (ConnectionRefusedError(), True),
    ],
    ids=["500", "503", "the API server's own 429", "a disruption budget's 429", "409", "404",
         "several budgets (always 500)", "a reset connection", "a refused connection"],
)  # fmt: skip
def test_what_is_worth_retrying(error: BaseException, retriable: bool) -> None:
    assert is_retriable(error) is retriable


def test_a_5xx_is_retried_with_growing_delays_until_it_passes() -> None:
    slept: list[float] = []
    call = failing([api_error(503), api_error(500)])
    assert call_with_retries(call, POLICY, sleep=slept.append) == "ok"
    assert slept == [0.1, 0.2]


def test_retries_are_bounded() -> None:
    slept: list[float] = []
    call = failing([api_error(503)] * 10)
    with pytest.raises(ApiException):
        call_with_retries(call, POLICY, sleep=slept.append)
    assert len(slept) == POLICY.attempts - 1


def test_the_servers_retry_after_is_honoured_within_a_bound() -> None:
    slept: list[float] = []
    call = failing([api_error(429, retry_after="3"), api_error(429, retry_after="60")])
    call_with_retries(call, POLICY, sleep=slept.append)
    assert slept == [3.0, 5.0]


def test_a_budget_refusal_is_raised_at_once_and_reads_as_one() -> None:
    slept: list[float] = []
    with pytest.raises(ApiException) as raised:
        call_with_retries(failing([BUDGET]), POLICY, sleep=slept.append)
    assert slept == []
    assert is_budget_refusal(raised.value)
    assert status_message(raised.value) == (
        "Cannot evict pod as it would violate the pod's disruption budget.; "
        "The disruption budget pdb needs 1 healthy pods"
    )
