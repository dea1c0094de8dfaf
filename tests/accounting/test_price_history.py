"""A flavor's price keeps its history: each change is in force from when it was made."""

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from gpupool.inventory.actions import do_save_flavor
from gpupool.inventory.models import Flavor

pytestmark = pytest.mark.django_db

T0 = datetime.fromisoformat("2026-03-01T00:00:00+00:00")


def h100_since(at: datetime, price: str = "2.5") -> Flavor:
    made = Flavor(name="h100", sharing="exclusive", gpu_memory_gb=80, hourly_price=Decimal(price))
    return do_save_flavor(made, acting_user=None, at=at)


def history(of: Flavor) -> list[tuple[datetime, Decimal]]:
    return list(of.price_changes.values_list("effective_from", "hourly_price"))


def test_a_new_flavor_starts_its_price_history() -> None:
    assert history(h100_since(T0)) == [(T0, Decimal("2.5"))]


def test_a_price_change_is_recorded_from_when_it_takes_effect() -> None:
    h100 = h100_since(T0)
    h100.hourly_price = Decimal("3")
    do_save_flavor(h100, acting_user=None, at=T0 + timedelta(days=30))
    assert history(h100) == [(T0, Decimal("2.5")), (T0 + timedelta(days=30), Decimal("3"))]


def test_saving_without_a_price_change_adds_no_history() -> None:
    h100 = h100_since(T0)
    h100.description = "HGX"
    do_save_flavor(h100, acting_user=None, at=T0 + timedelta(days=1))
    assert history(h100) == [(T0, Decimal("2.5"))]


def test_a_price_cannot_change_before_the_last_recorded_change() -> None:
    h100 = h100_since(T0)
    h100.hourly_price = Decimal("4")
    with pytest.raises(ValidationError) as refused:
        do_save_flavor(h100, acting_user=None, at=T0 - timedelta(days=1))
    assert "hourly_price" in refused.value.message_dict
    h100.refresh_from_db()
    assert h100.hourly_price == Decimal("2.5")
    assert history(h100) == [(T0, Decimal("2.5"))]
