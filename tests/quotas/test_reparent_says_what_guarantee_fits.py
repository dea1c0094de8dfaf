"""A re-parent whose guarantees would not fit the new parent says, as a guarantee's own
refusal does (``GuaranteeRoom.words``), what guarantee the moved queue could hold there."""

import pytest
from django.core.exceptions import ValidationError
from domain_builders import flavor, node, queue, quota

from gpupool.quotas.actions import do_save_queue
from gpupool.quotas.models import Queue, QueueQuota

pytestmark = pytest.mark.django_db


@pytest.fixture
def tree() -> dict[str, object]:
    """root -> org (guarantee 16 of h100) -> team-a (guarantee 14); root -> loose; 4 x 8
    healthy H100 = 32 GPUs."""
    h100 = flavor("h100")
    for index in range(4):
        node(f"n{index}", h100, gpus=8)
    root = queue("root")
    org = queue("org", parent=root)
    quota(org, h100, 16, 24, 32)
    team_a = queue("team-a", parent=org)
    quota(team_a, h100, 14, 14, 32)
    return {"h100": h100, "root": root, "org": org, "loose": queue("loose", parent=root)}


def moved_under_org(tree: dict, moved: Queue) -> str:
    """Move ``moved`` under org, expecting a refusal; its words on ``parent``."""
    moved.parent = tree["org"]
    with pytest.raises(ValidationError) as error:
        do_save_queue(moved, acting_user=None)
    assert Queue.objects.get(pk=moved.pk).parent == tree["root"]  # nothing moved
    return " ".join(error.value.message_dict["parent"])


def test_a_moved_queue_is_told_the_guarantee_it_could_hold_under_its_new_parent(
    tree: dict,
) -> None:
    quota(tree["loose"], tree["h100"], 4, 4, 4)
    why = moved_under_org(tree, tree["loose"])
    assert why == (
        "the guarantees inside org would total 18 h100 GPUs, more than its own guarantee of "
        "16; under org, loose can hold a guarantee of at most 2 h100 GPUs"
    )
    # and the room it names is what fits: with that guarantee the move goes through
    QueueQuota.objects.filter(queue=tree["loose"]).update(guarantee=2)
    loose = Queue.objects.get(pk=tree["loose"].pk)
    loose.parent = tree["org"]
    do_save_queue(loose, acting_user=None)
    assert Queue.objects.get(pk=loose.pk).parent == tree["org"]


def test_a_moved_queue_whose_children_guarantee_too_much_is_told_none_fits(tree: dict) -> None:
    child = queue("loose-a", parent=tree["loose"])
    quota(child, tree["h100"], 4, 4, 4)
    why = moved_under_org(tree, tree["loose"])
    assert why.endswith(
        "; under org, no guarantee of loose fits: its child queues guarantee 4 h100 GPUs "
        "inside it, more than the 2 it can hold"
    )
