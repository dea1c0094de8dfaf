"""``cordoned`` is gpupool's own cordon; a cordon made in the cluster (``kubectl cordon``) is the
cluster's exclusion, ``excluded``. ``gpupool nodes --state cordoned`` says where the cluster's
cordons are, and ``nodes end-drain`` of a node the cluster still excludes says why and when it
clears (it said only "but it is excluded, so it takes no placements yet")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from client_cli import run
from domain_builders import flavor, node, user

from gpupool.inventory.actions import do_drain_node
from gpupool.inventory.choices import NodeState
from gpupool.inventory.models import Node

pytestmark = pytest.mark.django_db(transaction=True)

ELSEWHERE = (
    "gpupool: nodes cordoned in the cluster (kubectl cordon), not by gpupool, are excluded: "
    "--state excluded lists them.\n"
)


@pytest.fixture
def pool(live_client: Any) -> None:
    """h100 nodes: ours (cordoned by gpupool), kubectl (cordoned in the cluster), n3 (ready);
    ada, an admin, is logged in."""
    h100 = flavor("h100")
    for name in ("ours", "kubectl", "n3"):
        node(name, h100, gpus=8)
    Node.objects.filter(name="ours").update(cordoned=True)
    Node.objects.filter(name="kubectl").update(cluster_exclusion="cordoned")
    live_client(user("ada", admin=True))


def test_state_cordoned_lists_gpupools_cordons_and_says_where_the_clusters_are(
    pool: None,
) -> None:
    status, out, err = run("nodes", "--state", "cordoned")
    assert (status, err) == (0, ELSEWHERE)
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["ours"]

    status, out, err = run("nodes", "--state", "excluded")
    assert (status, err) == (0, "")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["kubectl"]
    assert "the cluster takes no pods here: cordoned" in out

    status, out, err = run("nodes", "--state", "cordoned", "--state", "excluded")
    assert (status, err) == (0, "")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["kubectl", "ours"]
    assert run("nodes")[2] == ""


def test_with_json_the_note_is_a_warning_object_and_the_output_stays_the_list(
    pool: None,
) -> None:
    status, out, err = run("--json", "nodes", "--state", "cordoned")
    assert status == 0
    assert [n["name"] for n in json.loads(out)] == ["ours"]
    assert json.loads(err)["warning"]["code"] == "cluster-cordons-excluded"


def test_none_cordoned_by_gpupool_still_says_where_the_clusters_are(pool: None) -> None:
    Node.objects.filter(name="ours").update(cordoned=False)
    assert run("nodes", "--state", "cordoned") == (0, "No nodes.\n", ELSEWHERE)


def test_the_state_words_say_which_cordon_is_which() -> None:
    assert "by gpupool" in NodeState.CORDONED.label
    assert "cordoned in the cluster" in NodeState.EXCLUDED.label


def test_end_drain_of_a_node_the_cluster_still_has_cordoned_says_when_it_clears(
    pool: None,
) -> None:
    # The drain's cordon was pushed to the cluster; the last sync saw it there.
    do_drain_node(Node.objects.get(name="n3"), acting_user=None)
    Node.objects.filter(name="n3").update(cluster_exclusion="cordoned")
    status, out, err = run("nodes", "end-drain", "n3")
    assert status == 0, err
    assert out == (
        "n3's drain is ended: uncordoned, nothing more is evicted; but the cluster still has "
        "it cordoned (state excluded), as the control loop's last sync saw it: the loop lifts "
        "the cordon gpupool put there at its next cycle, and the node is ready from the sync "
        "after (a cordon made in the cluster, as with kubectl cordon, stays until it is "
        "lifted there).\n"
    )


def test_end_drain_of_a_node_not_ready_says_why_it_takes_nothing(pool: None) -> None:
    do_drain_node(Node.objects.get(name="n3"), acting_user=None)
    Node.objects.filter(name="n3").update(cluster_exclusion="not Ready")
    status, out, err = run("nodes", "end-drain", "n3")
    assert status == 0, err
    assert out == (
        "n3's drain is ended: uncordoned, nothing more is evicted; but it is excluded: the "
        "cluster takes no pods there (not Ready), as the control loop's last sync saw it; it "
        "takes placements from the first sync after the cluster does again.\n"
    )
