"""The admin's walk of the living demo (session 24): the Preemptions page of a pool with no
preemption yet said "No has been preempted" to an admin; the Cluster page's card counted
"2 broken · 1 cordoned" without saying the first are GPUs and the second nodes; a node gpupool
cordoned said so twice once the cluster reported its own cordon back ("the cluster takes no
pods here: cordoned" and "cordoned: no new placements"); a refused node form's message ran
into the next sentence ("say why the GPU is unhealthy Its form is below"); and the admin
site's list of preemption events named a victim without its namespace."""

from __future__ import annotations

from typing import Any

from dashboard_pages import live, text

from gpupool.inventory.models import Node


def node_row(page: str, name: str) -> str:
    """The Cluster page's row of node ``name``."""
    return page.split(f'id="node-{name}"', 1)[1].split("</tr>", 1)[0]


def test_an_admins_preemptions_page_with_none_yet_says_no_workload_has_been(
    pool: Any, page_as: Any
) -> None:
    page = text(page_as("ada").get("/preemptions/"))
    assert "No workload has been preempted. When the scheduler stops" in page
    assert "No has been" not in page
    # a team's member reads of their own teams' work, as before
    member = text(page_as("max").get("/preemptions/"))
    assert "No work of your teams has been preempted, nor has their work" in member


def test_the_cluster_card_says_broken_gpus_and_cordoned_nodes(pool: Any, page_as: Any) -> None:
    Node.objects.filter(name="n2").update(cordoned=True)
    card = text(live(page_as("ada"), "/cluster/")).split('<p class="label">h100</p>', 1)[1]
    card = card.split("</div>", 1)[0]
    assert "<strong>1 broken GPU</strong>" in card  # n1's GPU 3
    assert "<strong>1 cordoned node</strong>" in card


def test_a_node_gpupool_cordoned_says_its_cordon_once_when_the_cluster_reports_it_back(
    pool: Any, page_as: Any
) -> None:
    client = page_as("ada")
    client.post("/cluster/nodes/n2/cordon/", {"cordoned": "on", "reason": "rack work"})
    # the next sync finds the node cordoned in the cluster too: gpupool's own cordon
    Node.objects.filter(name="n2").update(cluster_exclusion="cordoned")
    row = node_row(text(client.get("/cluster/")), "n2")
    assert row.count("cordoned: no new placements") == 1
    assert "the cluster takes no pods here" not in row
    # a cordon made in the cluster alone (kubectl cordon) is still the cluster's to say
    Node.objects.filter(name="n2").update(cordoned=False)
    row = node_row(text(client.get("/cluster/")), "n2")
    assert "the cluster takes no pods here: cordoned" in row
    assert "no new placements" not in row


def test_a_refused_node_forms_message_ends_its_sentence_before_the_next(
    pool: Any, page_as: Any
) -> None:
    response = page_as("ada").post(
        "/cluster/nodes/n2/gpu-health/", {"index": "5", "reason": " ", "query": ""}
    )
    assert response.status_code == 400
    refused = text(response).split('id="node-form-refused">', 1)[1].split("</p>", 1)[0]
    assert refused.startswith(
        "n2 was not changed: Unhealthy because: say why the GPU is unhealthy. "
        '<a href="#node-n2">Its form is below</a>'
    )


def test_the_admin_sites_preemptions_name_each_workload_with_its_namespace_and_link_it(
    pool: Any, page_as: Any
) -> None:
    """The admin site's list of preemption events named a victim "train" (one in each
    team's namespace, which?) and wrote "8.000" GPUs freed and "24.4180" hours lost."""
    from datetime import timedelta
    from decimal import Decimal

    from django.utils import timezone
    from two_teams import submit

    from gpupool.accounting.actions import do_record_preemption

    ada = pool.users["ada"]
    ada.is_staff = ada.is_superuser = True
    ada.save()
    victim = submit(pool, "train", pool.vision_queue, "vic")
    preemptor = submit(pool, "train", pool.nlp_queue, "max")
    do_record_preemption(
        victim,
        reason="reclaim",
        at=timezone.now() - timedelta(minutes=5),
        gpus_freed=8,
        lost_gpu_hours=Decimal("24.418"),
        preemptor=preemptor,
    )
    page = text(page_as("ada").get("/admin/accounting/preemptionevent/"))
    row = page.split("<tbody>", 1)[1].split("</tr>", 1)[0]
    assert '<a href="/workloads/vision/train/">vision/train</a>' in row
    assert '<a href="/workloads/nlp/train/">nlp/train</a>' in row
    assert '<td class="field-freed">8</td>' in row
    assert '<td class="field-lost">24.42</td>' in row


def test_marking_a_gpu_unhealthy_says_the_work_on_it_keeps_running(pool: Any, page_as: Any) -> None:
    """Marked unhealthy, a GPU takes no new work, but the workload on it is not evicted: the
    page said only "n2 GPU 5 is unhealthy (XID 48)", and the admin had to find out which work
    still ran on it, and that it would run on."""
    from two_teams import submit

    from gpupool.workloads.actions import PlacementSpec, do_transition_workload

    train = submit(pool, "train", pool.nlp_queue, "max")
    do_transition_workload(
        train,
        "admitted",
        reason="test",
        placements=[PlacementSpec("main", 0, Node.objects.get(name="n2"), list(range(8)), None)],
    )
    client = page_as("ada")
    page = text(
        client.post(
            "/cluster/nodes/n2/gpu-health/", {"index": "5", "reason": "XID 48"}, follow=True
        )
    )
    assert (
        "n2 GPU 5 is unhealthy (XID 48): nothing new is placed on it. nlp/train, which holds "
        "it, keeps running until it ends or you drain n2."
    ) in page
    page = text(
        client.post(
            "/cluster/nodes/n1/gpu-health/", {"index": "0", "reason": "XID 79"}, follow=True
        )
    )
    assert "n1 GPU 0 is unhealthy (XID 79): nothing new is placed on it.</" in page  # nobody's
