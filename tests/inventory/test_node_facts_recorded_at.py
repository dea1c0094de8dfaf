"""``Node.last_synced_at`` is when the node's facts were last recorded: set when the node is
made (by the cluster sync, its bulk first sync, or a seed that passes no time) and at each
sync that changes them; an unchanged node is not rewritten (the loop stays cheap), so it is
never null for a node gpupool knows, and never a heartbeat."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from domain_builders import flavor

from gpupool.inventory.actions import do_sync_node
from gpupool.inventory.models import Node

pytestmark = pytest.mark.django_db

AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
LATER = datetime(2026, 12, 6, 13, 0, tzinfo=UTC)


def test_a_node_made_without_a_sync_time_has_its_facts_recorded_now() -> None:
    h100 = flavor()
    do_sync_node("seeded", flavor=h100, gpus=8, cpu=64, memory_gb=512)
    assert Node.objects.get(name="seeded").last_synced_at is not None


def test_the_time_moves_when_the_facts_change_and_not_otherwise() -> None:
    h100 = flavor()
    do_sync_node("n1", flavor=h100, gpus=8, cpu=64, memory_gb=512, at=AT)
    assert Node.objects.get(name="n1").last_synced_at == AT
    do_sync_node("n1", flavor=h100, gpus=8, cpu=64, memory_gb=512)  # a seed again: unchanged
    assert Node.objects.get(name="n1").last_synced_at == AT
    do_sync_node("n1", flavor=h100, gpus=8, cpu=96, memory_gb=512, at=LATER)
    assert Node.objects.get(name="n1").last_synced_at == LATER
