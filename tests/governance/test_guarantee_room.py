"""The guarantees of a flavor a queue can hold as the tree stands (``quotas.models
.guarantee_room``), which a guarantee's refusal names: at least what its children guarantee
inside it, at most what its nearest quota-holding ancestor (or the pool) has left beside the
other guarantees there.

The pool (``tests/governance/conftest``): 32 healthy h100 GPUs under root ``pool``; nlp and
vision at 4 / 8 / 16 each.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gpupool.quotas.actions import do_save_queue, do_set_queue_quota
from gpupool.quotas.models import GuaranteeRoom, Queue, guarantee_room

pytestmark = pytest.mark.django_db


def test_the_room_of_a_queue_holding_its_children_s_guarantees(pool: Any) -> None:
    # nlp (guarantee 4) holds a child guaranteeing 3 inside it
    child = do_save_queue(
        Queue(name="nlp-a", parent=pool.nlp_queue, tenant=pool.nlp), acting_user=None
    )
    do_set_queue_quota(child, pool.h100, guarantee=3, deserved=3, capability=3, acting_user=None)
    room = guarantee_room(pool.h100, pool.nlp_queue.pk)
    assert room == GuaranteeRoom(least=Decimal(3), most=Decimal(28))
    assert room.words("nlp", "h100") == (
        "; as the tree stands, nlp can hold a guarantee between 3 and 28 h100 GPUs"
    )
    # the child's own room: what nlp's guarantee of 4 leaves beside nothing else
    assert guarantee_room(pool.h100, child.pk) == GuaranteeRoom(least=Decimal(0), most=Decimal(4))


def test_a_queue_without_quota_counts_its_children_s_guarantees_against_the_pool(
    pool: Any,
) -> None:
    # a new team queue without quota, its child guaranteed 5 against the pool's 32
    parent = do_save_queue(Queue(name="speech", parent=pool.root), acting_user=None)
    child = do_save_queue(Queue(name="speech-a", parent=parent, tenant=pool.nlp), acting_user=None)
    do_set_queue_quota(child, pool.h100, guarantee=5, deserved=5, capability=5, acting_user=None)
    # given quota, the parent holds its child's 5 and counts against the pool beside 4 + 4
    assert guarantee_room(pool.h100, parent.pk) == GuaranteeRoom(least=Decimal(5), most=Decimal(24))
