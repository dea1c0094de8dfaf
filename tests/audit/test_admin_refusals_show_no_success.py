"""An action that refuses a save the form accepted: the admin rolls back and shows only why."""

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from domain_builders import flavor, node, priority_class, queue

from gpupool.audit.models import AuditEvent
from gpupool.inventory.actions import do_set_gpu_health
from gpupool.inventory.models import Gpu
from gpupool.quotas import admin as quotas_admin
from gpupool.quotas.actions import do_set_queue_quota
from gpupool.quotas.models import Queue, QueueQuota

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool() -> dict[str, Any]:
    h100 = flavor("h100")
    node("n1", h100, gpus=8)  # the pool holds 8 healthy GPUs: guarantees must fit in them
    priority_class("normal", default=True)
    root = queue("root")
    return {"h100": h100, "team": queue("team", parent=root), "other": queue("other", parent=root)}


def _messages(response: Any) -> list[tuple[str, str]]:
    """The messages the page after the redirect showed, as (level, text)."""
    return [(m.level_tag, str(m)) for m in response.context["messages"]]


@pytest.fixture
def gpus_fail_after_the_form_validated(monkeypatch: pytest.MonkeyPatch, pool: dict) -> None:
    """Between the form's validation and the action, six of the pool's 8 GPUs fail."""
    real = quotas_admin.do_set_queue_quota

    def racing(*args: Any, **kwargs: Any) -> Any:
        for gpu in Gpu.objects.filter(node__name="n1").order_by("index")[:6]:
            do_set_gpu_health(gpu, healthy=False, reason="XID 79", acting_user=None)
        return real(*args, **kwargs)

    monkeypatch.setattr(quotas_admin, "do_set_queue_quota", racing)


@pytest.mark.usefixtures("gpus_fail_after_the_form_validated")
def test_a_refused_add_shows_the_reason_and_no_success(admin_client: Client, pool: dict) -> None:
    # given a quota the form accepts (a guarantee of 4 fits 8 healthy GPUs), which the
    # action then refuses because only 2 GPUs are healthy when it runs
    form = {"queue": pool["team"].pk, "flavor": pool["h100"].pk}
    form |= {"guarantee": 4, "deserved": 4, "capability": 8}
    events = AuditEvent.objects.count()
    # when an admin adds it
    url = reverse("admin:quotas_queuequota_add")
    response = admin_client.post(url, form, follow=True)
    # then nothing is saved (the failed GPUs included), and the page says why and nothing else
    assert response.redirect_chain[-1][0] == url
    shown = _messages(response)
    assert [level for level, _ in shown] == ["error"], shown
    assert "Not saved" in shown[0][1] and "guarantee" in shown[0][1]
    assert not QueueQuota.objects.exists()
    assert Gpu.objects.filter(healthy=True).count() == 8
    assert AuditEvent.objects.count() == events


@pytest.mark.usefixtures("gpus_fail_after_the_form_validated")
def test_a_refused_change_shows_the_reason_and_no_success(admin_client: Client, pool: dict) -> None:
    quota = do_set_queue_quota(
        pool["team"], pool["h100"], guarantee=1, deserved=4, capability=8, acting_user=None
    )
    url = reverse("admin:quotas_queuequota_change", args=[quota.pk])
    response = admin_client.post(url, {"guarantee": 4, "deserved": 4, "capability": 8}, follow=True)
    assert response.redirect_chain[-1][0] == url
    shown = _messages(response)
    assert [level for level, _ in shown] == ["error"], shown
    quota.refresh_from_db()
    assert (quota.guarantee, quota.deserved, quota.capability) == (1, 4, 8)


def test_an_accepted_delete_still_says_it_was_deleted(admin_client: Client, pool: dict) -> None:
    url = reverse("admin:quotas_queue_delete", args=[pool["other"].pk])
    response = admin_client.post(url, {"post": "yes"}, follow=True)
    assert [level for level, _ in _messages(response)] == ["success"]
    assert not Queue.objects.filter(pk=pool["other"].pk).exists()


def test_an_accepted_change_still_says_it_was_saved(admin_client: Client, pool: dict) -> None:
    quota = do_set_queue_quota(
        pool["team"], pool["h100"], guarantee=2, deserved=4, capability=8, acting_user=None
    )
    url = reverse("admin:quotas_queuequota_change", args=[quota.pk])
    response = admin_client.post(url, {"guarantee": 3, "deserved": 4, "capability": 8}, follow=True)
    assert [level for level, _ in _messages(response)] == ["success"]
    quota.refresh_from_db()
    assert quota.guarantee == 3
