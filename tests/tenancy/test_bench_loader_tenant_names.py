"""The benchmark's loader (``control.actions.do_load_pool``) writes tenants and their
namespaces in bulk, past the models' validators: it runs the tenant name rule (the namespace
rule, ``tenancy.models.validate_tenant_name``) itself, so a snapshot whose tenant could not be
named in the API or the admin site is refused, naming ``tenant``, and nothing is written."""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.core.exceptions import ValidationError

from gpupool.control.actions import do_load_pool
from gpupool.control.bench import _moment, node_labels
from gpupool.simulation.scale_pool import synthetic_snapshot
from gpupool.tenancy.models import Tenant, TenantNamespace

pytestmark = pytest.mark.django_db


def test_a_snapshot_whose_tenant_breaks_the_name_rule_is_refused_naming_the_tenant() -> None:
    snapshot, _, now = synthetic_snapshot(5, 7)
    queues = tuple(
        replace(q, tenant="Team_A") if q.tenant == "t-000" else q for q in snapshot.queues
    )
    with pytest.raises(ValidationError) as refused:
        do_load_pool(replace(snapshot, queues=queues), at=_moment(now), node_labels=node_labels())
    [why] = refused.value.message_dict["tenant"]
    assert why.startswith("'Team_A': Enter a tenant name as a Kubernetes namespace name")
    assert not Tenant.objects.exists() and not TenantNamespace.objects.exists()


def test_the_bench_s_own_names_pass_the_rule() -> None:
    snapshot, _, now = synthetic_snapshot(5, 7)
    do_load_pool(snapshot, at=_moment(now), node_labels=node_labels())
    names = {q.tenant for q in snapshot.queues if q.tenant}
    assert set(Tenant.objects.values_list("name", flat=True)) == names
    for tenant in Tenant.objects.all():
        tenant.full_clean()  # the name rule, as the API and the admin site run it
