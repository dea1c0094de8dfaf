"""Walk s23: submitting from the Workloads page a gang that no single NVLink domain can ever
hold warned "nlp/x will not run as asked: It can never run as asked: it must sit in one NVLink
domain, ...": the core's sentence opens with the same words the warning had just said. The
warning says them once and reads on with the reason, as ``gpupool submit``'s warning does."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import SUBMIT_FORM
from django.contrib import messages

pytestmark = pytest.mark.django_db


def test_the_never_fits_warning_says_will_not_run_as_asked_once(pool: Any, page_as: Any) -> None:
    # Two 7-GPU pods that must share one NVLink domain; each node is its own domain of at
    # most 8 healthy GPUs, while the pool's 15 and the queue's capability (16) hold them: only
    # the topology can never be met.
    gang = SUBMIT_FORM | {"name": "gang", "pods": "2", "gpus_per_pod": "7", "topology": "domain"}
    response = page_as("max").post("/workloads/submit/", gang, follow=True)
    warnings = [str(m) for m in response.context["messages"] if m.level == messages.WARNING]
    assert len(warnings) == 1
    warning = warnings[0]
    assert warning.startswith("nlp/gang will not run as asked: it must sit in one NVLink domain")
    assert warning.lower().count("run as asked") == 1
    assert warning.endswith("It has no place in line until its queue's quota or the pool changes.")
