"""Children's guarantees fit in the parent's; the top-level guarantees fit the healthy pool."""

import pytest
from django.core.exceptions import ValidationError
from domain_builders import flavor, node, queue, quota

from gpupool.inventory.actions import do_set_gpu_health
from gpupool.inventory.models import Gpu
from gpupool.quotas.actions import do_delete_queue_quota, do_save_queue
from gpupool.quotas.models import Queue, QueueQuota

pytestmark = pytest.mark.django_db


@pytest.fixture
def tree() -> dict[str, object]:
    """root -> org (guarantee 16 of h100) -> team-a, team-b; 4 x 8 healthy H100 = 32 GPUs."""
    h100 = flavor("h100")
    for index in range(4):
        node(f"n{index}", h100, gpus=8)
    root = queue("root")
    org = queue("org", parent=root)
    quota(org, h100, 16, 24, 32)
    return {
        "h100": h100,
        "root": root,
        "org": org,
        "a": queue("team-a", parent=org),
        "b": queue("team-b", parent=org),
    }


def test_children_whose_guarantees_fit_the_parent_are_accepted(tree: dict) -> None:
    quota(tree["a"], tree["h100"], 8, 16, 32)
    quota(tree["b"], tree["h100"], 8, 16, 32)
    assert QueueQuota.objects.filter(queue__parent=tree["org"]).count() == 2


def test_a_child_guarantee_beyond_the_parent_is_refused_naming_guarantee(tree: dict) -> None:
    quota(tree["a"], tree["h100"], 8, 16, 32)
    with pytest.raises(ValidationError) as error:
        quota(tree["b"], tree["h100"], 9, 16, 32)
    message = error.value.message_dict["guarantee"][0]
    assert "inside org would total 17" in message
    assert not QueueQuota.objects.filter(queue=tree["b"]).exists()


def test_lowering_a_parent_below_its_children_is_refused(tree: dict) -> None:
    quota(tree["a"], tree["h100"], 8, 16, 32)
    quota(tree["b"], tree["h100"], 8, 16, 32)
    with pytest.raises(ValidationError) as error:
        quota(tree["org"], tree["h100"], 12, 24, 32)
    assert "guarantee" in error.value.message_dict


def test_grandchildren_count_against_the_nearest_ancestor_with_a_quota(tree: dict) -> None:
    # given a sub-team under team-a, which has no h100 quota of its own
    sub = queue("sub", parent=tree["a"])
    quota(tree["b"], tree["h100"], 10, 10, 32)
    # then the sub-team's guarantee counts against org's 16
    with pytest.raises(ValidationError) as error:
        quota(sub, tree["h100"], 7, 8, 8)
    assert "inside org" in error.value.message_dict["guarantee"][0]
    quota(sub, tree["h100"], 6, 8, 8)


def test_top_level_guarantees_must_fit_the_healthy_capacity(tree: dict) -> None:
    # org holds 16 of the 32 healthy GPUs; another top-level queue may hold 16 more, not 17
    other = queue("other", parent=tree["root"])
    with pytest.raises(ValidationError) as error:
        quota(other, tree["h100"], 17, 17, 17)
    assert "pool's 32 healthy" in error.value.message_dict["guarantee"][0]
    quota(other, tree["h100"], 16, 16, 16)


def test_unhealthy_gpus_do_not_count_as_capacity(tree: dict) -> None:
    for gpu in Gpu.objects.filter(node__name="n0")[:2]:
        do_set_gpu_health(gpu, healthy=False, reason="XID 79", acting_user=None)
    other = queue("other", parent=tree["root"])
    with pytest.raises(ValidationError) as error:
        quota(other, tree["h100"], 15, 15, 15)
    assert "pool's 30 healthy" in error.value.message_dict["guarantee"][0]


def test_a_pool_that_lost_gpus_can_still_lower_its_guarantees(tree: dict) -> None:
    # given the pool shrank below org's guarantee
    for gpu in Gpu.objects.filter(node__name__in=["n0", "n1", "n2"]):
        do_set_gpu_health(gpu, healthy=False, reason="XID 79", acting_user=None)
    # then raising is refused but lowering (still over capacity) is allowed
    with pytest.raises(ValidationError):
        quota(tree["org"], tree["h100"], 20, 24, 32)
    quota(tree["org"], tree["h100"], 12, 24, 32)


def test_removing_a_parent_quota_moves_its_children_up_to_the_pool(tree: dict) -> None:
    quota(tree["a"], tree["h100"], 8, 16, 32)
    other = queue("other", parent=tree["root"])
    quota(other, tree["h100"], 16, 16, 16)
    # without org's quota, team-a's 8 would join other's 16 at the top: 24 <= 32 fits
    do_delete_queue_quota(QueueQuota.objects.get(queue=tree["org"]), acting_user=None)
    # but growing team-a now counts against the pool directly
    with pytest.raises(ValidationError) as error:
        quota(tree["a"], tree["h100"], 17, 17, 32)
    assert "top-level h100 guarantees would total 33" in error.value.message_dict["guarantee"][0]


def test_moving_a_queue_under_a_parent_without_room_is_refused_naming_parent(tree: dict) -> None:
    quota(tree["a"], tree["h100"], 16, 16, 32)
    loose = queue("loose", parent=tree["root"])
    quota(loose, tree["h100"], 4, 4, 4)
    loose.parent = tree["org"]
    with pytest.raises(ValidationError) as error:
        do_save_queue(loose, acting_user=None)
    assert "parent" in error.value.message_dict
    assert Queue.objects.get(name="loose").parent == tree["root"]
