"""`gpupool seed-demo` run again while demo nodes are down (NotReady on a restarted plane, as
the loop's sync records it: ``cluster_exclusion``) and a queue is to be made again: the
queue's guarantees must fit the healthy capacity of nodes that take pods, which the down
nodes' GPUs are not. It refuses (exit 2) naming the nodes and why, writes nothing, and once
they are back the same run makes the queue with its quotas. A run that makes nothing new is
not held up by a node down."""

from __future__ import annotations

from decimal import Decimal
from io import StringIO
from typing import Any

import pytest

from gpupool.cli.subcommands.seed_demo import run
from gpupool.inventory.models import Node
from gpupool.quotas.actions import do_delete_queue
from gpupool.quotas.models import Queue, QueueQuota

pytestmark = pytest.mark.django_db

PRODUCT = ("search", "ads", "recsys", "product")


@pytest.fixture(autouse=True)
def fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def seed_demo() -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    status = run({}, out, err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture
def seeded() -> list[str]:
    """The demo seeded; then both MIG A100 nodes NotReady (their names returned)."""
    assert seed_demo()[0] == 0
    mig = Node.objects.filter(flavor__name="a100-3g.40gb").order_by("name")
    names = list(mig.values_list("name", flat=True))
    assert len(names) == 2
    mig.update(cluster_exclusion="not Ready")  # as the loop's sync records it
    return names


def test_a_rerun_that_makes_a_queue_names_the_nodes_down_and_writes_nothing(
    seeded: list[str],
) -> None:
    # The product organisation's queues deleted since (the test's shortcut for their quotas:
    # no work ran there).
    for name in PRODUCT:
        queue = Queue.objects.get(name=name)
        for quota in queue.quotas.all():
            quota.delete()
        do_delete_queue(queue, acting_user=None)

    status, out, err = seed_demo()

    assert status == 2 and out == "", err
    assert f"{seeded[0]} (not Ready), {seeded[1]} (not Ready)" in err, err
    assert "a100-3g.40gb guarantees would total 16 MIG instances" in err, err
    assert "nothing was written: run seed-demo again once they are back" in err, err
    assert "does not fit this cluster" not in err, err  # the demo's pool: nodes are down
    assert not Queue.objects.filter(name__in=PRODUCT).exists()

    Node.objects.filter(name__in=seeded).update(cluster_exclusion="")  # Ready again
    assert seed_demo()[0] == 0
    product = QueueQuota.objects.get(queue__name="product", flavor__name="a100-3g.40gb")
    assert (product.guarantee, product.deserved, product.capability) == (
        Decimal(8),
        Decimal(16),
        Decimal(32),
    )


def test_a_rerun_that_makes_nothing_new_is_not_held_up_by_nodes_down(seeded: list[str]) -> None:
    status, out, err = seed_demo()
    assert (status, err) == (0, "")
    assert "Demo pool ready" in out
