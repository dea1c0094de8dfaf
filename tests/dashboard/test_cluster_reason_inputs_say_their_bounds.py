"""The Cluster page's reason inputs say, as ``maxlength``, the bound the server refuses past:
a node's cordon, uncordon, drain and end of drain (``NODE_REASON_MAX_LENGTH``, their form's and
the nodes API's), a GPU's unhealthy mark (``UNHEALTHY_REASON_MAX_LENGTH``, the model field's).
Every node state offers its own forms: each is read."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from dashboard_pages import text
from django.utils import timezone
from domain_builders import node

from gpupool.dashboard.forms import CordonForm, GpuHealthForm
from gpupool.inventory.api import NODE_REASON_MAX_LENGTH, CordonSerializer, GpuHealthSerializer
from gpupool.inventory.models import UNHEALTHY_REASON_MAX_LENGTH, Gpu, Node


class ReasonInputs(HTMLParser):
    """Each ``reason`` input of the page: the action of its form, its id and its maxlength."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.inputs: list[tuple[str, str, str | None]] = []
        self._action = ""
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self._action = str(found.get("action") or "")
        elif tag == "input" and found.get("name") == "reason":
            self.inputs.append((self._action, str(found.get("id")), found.get("maxlength")))


def test_the_bounds_are_the_ones_the_forms_the_api_and_the_model_check() -> None:
    assert CordonForm.base_fields["reason"].max_length == NODE_REASON_MAX_LENGTH  # type: ignore[attr-defined]
    assert CordonSerializer().fields["reason"].max_length == NODE_REASON_MAX_LENGTH
    unhealthy_reason = Gpu._meta.get_field("unhealthy_reason")
    assert unhealthy_reason.max_length == UNHEALTHY_REASON_MAX_LENGTH
    assert GpuHealthForm.base_fields["reason"].max_length == UNHEALTHY_REASON_MAX_LENGTH  # type: ignore[attr-defined]
    assert GpuHealthSerializer().fields["reason"].max_length == UNHEALTHY_REASON_MAX_LENGTH


def test_every_reason_input_says_the_bound_of_its_field(pool: Any, page_as: Any) -> None:
    now = timezone.now()
    # n1 (a broken GPU) and n2 in service; then one node cordoned, draining, drained.
    for name in ("c1", "d1", "e1"):
        node(name, pool.h100, gpus=2)
    Node.objects.filter(name="c1").update(cordoned=True)
    Node.objects.filter(name="d1").update(cordoned=True, drain_requested_at=now)
    Node.objects.filter(name="e1").update(cordoned=True, drain_requested_at=now, drained_at=now)

    inputs = ReasonInputs(text(page_as("ada").get("/cluster/"))).inputs

    bounds = {"cordon": NODE_REASON_MAX_LENGTH, "drain": NODE_REASON_MAX_LENGTH}
    bounds["gpu-health"] = UNHEALTHY_REASON_MAX_LENGTH
    seen = set()
    for action, input_id, maxlength in inputs:
        form = action.rstrip("/").rsplit("/", 1)[-1]
        assert maxlength == str(bounds[form]), f"{input_id} (posts to {action}): {maxlength}"
        seen.add((form, input_id.split("-")[0]))
    # Each kind of input was read: cordon, uncordon, end a drain (draining and drained),
    # drain, and mark a GPU unhealthy.
    assert {
        ("cordon", "cordon"),
        ("cordon", "uncordon"),
        ("cordon", "end"),
        ("drain", "drain"),
        ("gpu-health", "why"),
    } <= seen
