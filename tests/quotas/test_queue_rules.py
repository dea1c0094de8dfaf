"""Queue settings: a tree without cycles, positive weight, protection bounds, lending limit."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from domain_builders import queue

from gpupool.quotas.actions import do_save_queue
from gpupool.quotas.models import Queue

pytestmark = pytest.mark.django_db


def test_a_queue_cannot_become_its_own_ancestor() -> None:
    root = queue("root")
    org = queue("org", parent=root)
    team = queue("team", parent=org)
    root.parent = team
    with pytest.raises(ValidationError) as error:
        do_save_queue(root, acting_user=None)
    assert "parent" in error.value.message_dict
    assert Queue.objects.get(name="root").parent is None


def test_a_queue_cannot_be_its_own_parent() -> None:
    root = queue("root")
    root.parent = root
    with pytest.raises(ValidationError) as error:
        do_save_queue(root, acting_user=None)
    assert "own parent" in error.value.message_dict["parent"][0]


@pytest.mark.parametrize("weight", [Decimal(0), Decimal(-1)], ids=["zero", "negative"])
def test_weight_must_be_positive(weight: Decimal) -> None:
    with pytest.raises(ValidationError) as error:
        queue("team", weight=weight)
    assert "weight" in error.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        Queue.objects.create(name="raw", weight=weight)


def test_a_fractional_weight_is_accepted() -> None:
    assert queue("team", weight=Decimal("0.5")).weight == Decimal("0.5")


def test_default_protection_may_not_exceed_the_maximum() -> None:
    with pytest.raises(ValidationError) as error:
        queue("team", default_protected_runtime_s=7200, max_protected_runtime_s=3600)
    assert "default_protected_runtime_s" in error.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        Queue.objects.create(
            name="raw", default_protected_runtime_s=7200, max_protected_runtime_s=3600
        )
    made = queue("ok", default_protected_runtime_s=1800, max_protected_runtime_s=3600)
    assert made.max_protected_runtime_s == 3600


def test_a_negative_lending_limit_is_refused() -> None:
    with pytest.raises(ValidationError) as error:
        queue("team", lending_limit=Decimal(-1))
    assert "lending_limit" in error.value.message_dict
    assert queue("ok", lending_limit=Decimal(0)).lending_limit == 0
