"""guarantee <= deserved <= capability: refused in validation (naming the field) and by the DB."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from domain_builders import flavor, node, queue, quota

from gpupool.audit.models import AuditEvent
from gpupool.quotas.models import QueueQuota

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool() -> dict[str, object]:
    h100 = flavor("h100")
    for index in range(4):
        node(f"n{index}", h100, gpus=8)
    root = queue("root")
    return {"h100": h100, "team": queue("team", parent=root)}


@pytest.mark.parametrize(
    "levels",
    [(0, 0, 0), (0, 8, 16), (8, 8, 8), (4, 8, 32)],
    ids=["all zero", "nothing guaranteed", "all equal", "strictly increasing"],
)  # fractions: on shared flavors only (tests/quotas/test_whole_gpu_quotas.py)
def test_ordered_levels_are_accepted(pool: dict, levels: tuple) -> None:
    made = quota(pool["team"], pool["h100"], *levels)
    assert (made.guarantee, made.deserved, made.capability) == tuple(
        Decimal(str(level)) for level in levels
    )


@pytest.mark.parametrize(
    ("levels", "field"),
    [((9, 8, 16), "guarantee"), ((0, 17, 16), "deserved"), ((-1, 8, 16), "guarantee")],
    ids=["guarantee above deserved", "deserved above capability", "negative guarantee"],
)
def test_unordered_levels_are_refused_naming_the_field(
    pool: dict, levels: tuple, field: str
) -> None:
    with pytest.raises(ValidationError) as error:
        quota(pool["team"], pool["h100"], *levels)
    assert field in error.value.message_dict
    # and nothing was written: no quota, no audit row
    assert not QueueQuota.objects.exists()
    assert not AuditEvent.objects.filter(action="quotas.set_queue_quota").exists()


def test_a_refused_change_leaves_the_previous_quota_in_place(pool: dict) -> None:
    quota(pool["team"], pool["h100"], 4, 8, 16)
    with pytest.raises(ValidationError):
        quota(pool["team"], pool["h100"], 12, 8, 16)
    kept = QueueQuota.objects.get()
    assert (kept.guarantee, kept.deserved, kept.capability) == (4, 8, 16)


@pytest.mark.parametrize(
    "levels", [(9, 8, 16), (0, 17, 16)], ids=["guarantee > deserved", "deserved > capability"]
)
def test_the_database_refuses_unordered_levels(pool: dict, levels: tuple) -> None:
    guarantee, deserved, capability = levels
    with pytest.raises(IntegrityError), transaction.atomic():
        QueueQuota.objects.create(
            queue=pool["team"],
            flavor=pool["h100"],
            guarantee=guarantee,
            deserved=deserved,
            capability=capability,
        )


def test_the_database_refuses_two_quotas_of_one_flavor(pool: dict) -> None:
    quota(pool["team"], pool["h100"], 0, 8, 16)
    with pytest.raises(IntegrityError), transaction.atomic():
        QueueQuota.objects.create(queue=pool["team"], flavor=pool["h100"])
