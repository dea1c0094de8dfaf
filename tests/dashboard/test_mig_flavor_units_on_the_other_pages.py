"""Every page that says a MIG flavor's figures says them in its MIG instances, as the Overview
and the Fragmentation page do (``inventory.units``: the one rule), never as GPUs: the Queues
page, a quota request's approval page, the Requests page (its form's labels and its quotas
table), the Audit log's quota changes, the Cluster page's cards and the Cost page's prices.
A whole-GPU flavor's figures stay GPUs.

The pool: the two teams' h100 nodes n1 (8 GPUs, one broken) and n2 (8), and MIG node m1 of
flavor ``a100-3g.40gb``: 8 A100 cards of two 3g.40gb instances each, card 5 broken, so 14
healthy MIG instances; nlp and vision each hold a quota of 4 / 8 / 16 of it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from dashboard_pages import live, text
from domain_builders import MIG_FLAVOR, mig_beside
from two_teams import quota_request

from gpupool.inventory.models import Flavor
from gpupool.inventory.units import GPU_UNIT, MIG_UNIT, flavor_units
from gpupool.quotas.actions import do_set_queue_quota
from gpupool.quotas.models import QuotaRequest

MIG = MIG_FLAVOR


@pytest.fixture
def mig_pool(pool: Any) -> Any:
    """The pool with MIG node m1 beside the h100 nodes (one card broken), and a quota of it
    for each team."""
    mig_beside(pool, unhealthy_gpus={5: "XID 79"})
    return pool


def words(html: str) -> str:
    """The text of a piece of a page, tags dropped and spaces squeezed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def mig_request(pool: Any) -> QuotaRequest:
    """nlp's submitted request for more of the MIG flavor (guarantee 4 -> 6, deserved 8 -> 10)."""
    return quota_request(pool, flavor=pool.mig, justification="more slices", submit=True)


def test_the_queues_page_counts_a_mig_flavors_quotas_in_mig_instances(
    mig_pool: Any, page_as: Any
) -> None:
    part = text(live(page_as("max"), f"/queues/?flavor={MIG}"))
    table = part.split("<table>", 1)[1].split("</table>", 1)[0]
    assert "the pool has 14 MIG instances healthy" in words(table)
    nlp = words(table.split('data-queue="nlp"', 1)[1].split("</tr>", 1)[0])
    assert "4 MIG instances 8 MIG instances 16 MIG instances" in nlp
    assert "GPU" not in table
    # A whole-GPU flavor's stay GPUs.
    h100 = text(live(page_as("max"), "/queues/?flavor=h100"))
    assert "the pool has 15 GPUs healthy" in words(h100)


def test_the_approval_page_says_a_mig_requests_levels_and_the_pool_in_mig_instances(
    mig_pool: Any, page_as: Any
) -> None:
    request = mig_request(mig_pool)
    page = text(page_as("ada").get(f"/approvals/{request.pk}/"))
    fit = page.split('id="fit-title"', 1)[1].split("</section>", 1)[0]
    said = words(fit)
    assert "guarantee 4 MIG instances 6 MIG instances" in said
    assert "deserved 8 MIG instances 10 MIG instances" in said
    assert f"The pool has 14 MIG instances healthy {MIG}." in said
    assert "GPU" not in said.replace("GPUs or MIG instances", "")
    shares = words(page.split('id="shares-title"', 1)[1].split("</section>", 1)[0])
    assert "MIG instance" in shares and "GPU" not in shares, shares


def test_the_requests_form_labels_its_levels_for_either_unit_and_the_quotas_in_theirs(
    mig_pool: Any, page_as: Any
) -> None:
    page = text(page_as("lena").get("/requests/"))
    assert "Guarantee (GPUs or MIG instances)" in page
    assert "Guarantee (GPUs)" not in page
    quotas = page.split("Your queues' quotas now", 1)[1].split("</table>", 1)[0]
    rows = {words(row).split()[1]: words(row) for row in quotas.split("<tr>")[2:]}
    assert rows[MIG] == f"nlp {MIG} 4 MIG instances 8 MIG instances 16 MIG instances"
    assert rows["h100"] == "nlp h100 4 GPUs 8 GPUs 16 GPUs"


def test_the_audit_log_says_a_mig_quotas_change_in_mig_instances(
    mig_pool: Any, page_as: Any
) -> None:
    ada = mig_pool.users["ada"]
    mig = Flavor.objects.get(name=MIG)
    do_set_queue_quota(
        mig_pool.vision_queue, mig, guarantee=4, deserved=9, capability=16, acting_user=ada
    )
    h100 = mig_pool.h100
    do_set_queue_quota(
        mig_pool.vision_queue, h100, guarantee=4, deserved=9, capability=16, acting_user=ada
    )
    said = words(text(page_as("ada").get("/audit/")))
    assert "deserved: 8 MIG instances → 9 MIG instances" in said
    assert "deserved: 8 GPUs → 9 GPUs" in said  # the h100 quota's
    assert "8 GPUs → 9 MIG" not in said and "8 MIG instances → 9 GPUs" not in said


def test_the_cluster_card_of_a_mig_flavor_counts_its_mig_instances(
    mig_pool: Any, page_as: Any
) -> None:
    part = words(text(live(page_as("ada"), "/cluster/")))
    card = part.split(f"{MIG} ", 1)[1][:120]
    assert card.startswith("14 MIG instances allocatable, cut from 8 physical GPUs"), card
    assert "GPUs / MIG" not in part and "GPUs MIG instances" not in part
    assert "15 GPUs allocatable of 16 physical GPUs" in part


def test_the_cost_pages_prices_count_a_mig_flavor_in_mig_instance_hours(
    mig_pool: Any, page_as: Any
) -> None:
    page = text(page_as("fin").get("/cost/"))
    prices = page.split('id="prices-title"', 1)[1].split("</table>", 1)[0]
    rows = {words(row).split()[0]: words(row) for row in prices.split("<tr>")[2:]}
    assert "2.50 per MIG instance-hour 14 MIG instances 35.00" in rows[MIG], rows[MIG]
    assert "2.50 15 GPUs 37.50" in rows["h100"], rows["h100"]


def test_the_units_of_many_flavors_are_read_in_one_query(
    mig_pool: Any, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(1):
        units = flavor_units([MIG, "h100", MIG, "gone"])
    assert units == {MIG: MIG_UNIT, "h100": GPU_UNIT}
    with django_assert_num_queries(0):
        assert flavor_units([]) == {}
