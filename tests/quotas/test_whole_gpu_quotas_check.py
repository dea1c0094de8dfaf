"""Quotas on flavors given whole (exclusive or MIG) stay whole numbers after the fact: the
system check ``quotas.W001`` names queue quotas that hold a fraction of a GPU on such a flavor
(set before the whole-number rule, or their flavor's sharing changed since; nothing rounds
them), and a shared flavor with fractional quotas cannot be made exclusive or MIG."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from domain_builders import flavor, queue, quota, tenant

from gpupool.inventory.actions import do_save_flavor
from gpupool.inventory.models import Flavor
from gpupool.quotas.checks import check_whole_gpu_quotas
from gpupool.quotas.models import QueueQuota

pytestmark = pytest.mark.django_db


def test_a_fraction_on_a_whole_gpu_flavor_stored_before_the_rule_is_named() -> None:
    h100 = flavor("h100")
    shared = flavor("l40s-shared", sharing="shared")
    root = queue("root")
    nlp = queue("nlp", parent=root, tenant=tenant("nlp"))
    quota(nlp, h100, 0, 4, 8)
    quota(nlp, shared, 0, Decimal("0.5"), 1)  # a fraction where fractions are taken
    assert check_whole_gpu_quotas(databases=["default"]) == []
    # As a quota set before the rule is stored (no action would write it now).
    QueueQuota.objects.filter(queue=nlp, flavor=h100).update(deserved=Decimal("4.5"))
    (warning,) = check_whole_gpu_quotas(databases=["default"])
    assert warning.id == "quotas.W001"
    assert warning.msg.endswith(": nlp/h100.")
    assert "1 queue quota in database 'default' holds a fraction" in warning.msg
    # A database check: without databases it looks at none.
    assert check_whole_gpu_quotas(databases=None) == []


def test_a_shared_flavor_with_fractional_quotas_cannot_become_whole() -> None:
    """A shared flavor made exclusive under a quota of half a GPU would leave a quota no pod
    can use: the flavor's save is refused naming ``sharing`` and the queues, nothing written;
    once the quota is whole, the change goes through."""
    shared = flavor("l40s", sharing="shared")
    nlp = queue("nlp", parent=queue("root"), tenant=tenant("nlp"))
    quota(nlp, shared, 0, Decimal("0.5"), 1)
    shared.sharing = "exclusive"
    with pytest.raises(ValidationError) as refused:
        do_save_flavor(shared, acting_user=None)
    assert "nlp" in refused.value.message_dict["sharing"][0]
    assert Flavor.objects.get(pk=shared.pk).sharing == "shared"
    quota(nlp, Flavor.objects.get(pk=shared.pk), 0, 1, 1)
    shared.refresh_from_db()
    shared.sharing = "exclusive"
    do_save_flavor(shared, acting_user=None)
    assert Flavor.objects.get(pk=shared.pk).sharing == "exclusive"
