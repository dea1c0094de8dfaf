"""The system check ``quotas.W001`` names queue quotas that hold a fraction of a GPU on a
flavor whose GPUs are given whole (exclusive or MIG): set before the whole-number rule, or
their flavor's sharing changed since. Nothing rounds them; the check names them so an admin
sets them again."""

from __future__ import annotations

from decimal import Decimal

import pytest
from domain_builders import flavor, queue, quota, tenant

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
