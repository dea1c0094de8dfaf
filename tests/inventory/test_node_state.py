"""A node's state in one word (``Node.state``): the one rule the pages and the nodes API
read. A drain is *draining* while work remains and *drained* once the loop found
the node empty; both stay cordoned until an admin uncordons the node."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from domain_builders import flavor
from domain_builders import node as build_node

from gpupool.inventory.choices import NodeState
from gpupool.inventory.models import Node

AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Case:
    name: str
    fields: dict[str, Any]
    want: NodeState


CASES = [
    Case("a node nobody touched is ready", {}, NodeState.READY),
    Case("a cordoned node is cordoned", {"cordoned": True}, NodeState.CORDONED),
    Case(
        "a drain with work left is draining",
        {"cordoned": True, "drain_requested_at": AT},
        NodeState.DRAINING,
    ),
    Case(
        "a drain the loop found empty is drained",
        {"cordoned": True, "drain_requested_at": AT, "drained_at": AT},
        NodeState.DRAINED,
    ),
    Case(
        "a node the cluster takes no pods on is excluded",
        {"cluster_exclusion": "not Ready"},
        NodeState.EXCLUDED,
    ),
    Case(
        "a drained node the cluster also excludes still says drained",
        {"cordoned": True, "drain_requested_at": AT, "drained_at": AT, "cluster_exclusion": "x"},
        NodeState.DRAINED,
    ),
    Case(
        "a node gone from the cluster is gone, whatever else",
        {"cordoned": True, "drain_requested_at": AT, "gone_at": AT, "cluster_exclusion": "gone"},
        NodeState.GONE,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_state_word(case: Case) -> None:
    assert Node(name="n1", **case.fields).state == case.want


def test_the_health_reasons_say_drained_not_draining_once_empty(db: Any) -> None:
    node = build_node("n1", flavor("h100"), gpus=2)
    node.cordoned, node.drain_requested_at, node.drained_at = True, AT, AT
    assert node.health_reasons() == ["drained: empty, and cordoned until an admin uncordons it"]
    node.drained_at = None
    assert node.health_reasons() == ["draining: its workloads are being evicted"]
