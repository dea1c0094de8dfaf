"""Template filters and tags of the dashboard: numbers with their units, times the browser
shows in the viewer's zone, and the page's live-refresh attributes.

One format per quantity, on every page (docs/dashboard.md, "Numbers and times"): GPUs to the
milli-GPU (``GPU_PLACES``), GPU-hours to the hundredth (``GPU_HOURS_PLACES``), trailing zeros
dropped, money to the cent (``money``; a price per GPU-hour ``price``) (the rule is
``gpupool.number_formats``', which the models' summaries use too); a moment's zone named by
its offset (``workloads.queries.zone_name``)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from gpupool.dashboard.context import PALETTE_CSS
from gpupool.inventory.units import flavor_unit
from gpupool.number_formats import (
    GPU_HOURS_PLACES,
    GPU_PLACES,
    MINUS,
    MONEY_PLACES,
    NO_VALUE,
    PRICE_PLACES,
    Number,
    duration,
    money,
    plain_number,
    with_unit,
)
from gpupool.workloads.queries import zone_name

register = template.Library()


@register.filter
def gpus(value: Number | str | None) -> str:
    """A number of GPUs: ``8 GPUs``, ``1 GPU``, ``0.125 GPUs`` (to the milli-GPU)."""
    return with_unit(value, "GPU", "GPUs", places=GPU_PLACES)


@register.filter
def in_unit(value: Number | str | None, unit: str) -> str:
    """An amount and its unit as the pages write GPUs (``8 GPUs``, ``1 MIG instance``,
    ``0.5 GPUs``; an en dash for no value; a decimal string, as JSON keeps one, read alike);
    ``unit`` is ``inventory.units``' GPU_UNIT or MIG_UNIT."""
    return with_unit(value, unit, f"{unit}s", places=GPU_PLACES)


@register.filter
def in_unit_of(value: Number | str | None, flavor: Any) -> str:
    """``in_unit`` in the unit of ``flavor`` (a Flavor: ``inventory.units.flavor_unit``)."""
    return in_unit(value, flavor_unit(flavor.sharing))


@register.filter
def gpu_number(value: Number | str | None) -> str:
    """A number of GPUs without its unit, for a column whose header names it (``0.125``)."""
    return number_or_dash(value, GPU_PLACES)


@register.filter
def gpu_hours(value: Number | str | None) -> str:
    """GPU-hours: ``12.5 GPU-h``, ``129.78 GPU-h`` (to the hundredth)."""
    return with_unit(value, "GPU-h", "GPU-h", places=GPU_HOURS_PLACES)


@register.filter
def hours_number(value: Number | str | None) -> str:
    """Hours of a unit without it (GPU-hours, MIG instance-hours: ``129.78``, to the
    hundredth as ``gpu_hours``), for a table whose caption or header names the unit (the
    Cost page's MIG table: "MIG instance-hours" in each of its eight cells made it twice
    as wide as a laptop's window)."""
    return number_or_dash(value, GPU_HOURS_PLACES)


@register.filter(name="money")
def money_filter(value: Number | str | None) -> str:
    """Money, to the cent with thousands separators: ``13,418.23``, ``0.00`` (unit-less: the
    product has no currency setting; an en dash for no value)."""
    return money_or_dash(value, MONEY_PLACES)


@register.filter
def price(value: Number | str | None) -> str:
    """A price per GPU-hour, as money but to the places the price list keeps: ``2.50``,
    ``0.0125`` (the column or sentence says "per GPU-hour")."""
    return money_or_dash(value, PRICE_PLACES)


def money_or_dash(value: Number | str | None, places: int) -> str:
    """``number_formats.money``, an en dash for no value, and a value that is no number as
    it is."""
    if value is None or value == "":
        return NO_VALUE
    try:
        return money(value, places)
    except InvalidOperation:
        return str(value)


def number_or_dash(value: Number | str | None, places: int) -> str:
    """``plain_number``, an en dash for no value, and a value that is no number as it is."""
    if value is None or value == "":
        return NO_VALUE
    try:
        return plain_number(value, places)
    except InvalidOperation:
        return str(value)


# Audited fields that hold a quantity, by name: the Audit page shows their values in its
# format. Budgets' GPU-hours end in ``gpu_hours``; quotas' levels are GPUs.
GPU_FIELDS = frozenset(
    {"guarantee", "deserved", "capability", "lending_limit", "gpus", "gpus_freed", "healthy_gpus"}
)


def field_value(field: str, value: object) -> object:
    """An audited field's value, in its quantity's format when the field holds GPUs or
    GPU-hours (``remaining_gpu_hours``: ``129.78 GPU-h``), else as it is."""
    if value is None or isinstance(value, bool) or not isinstance(value, int | float | str):
        return value
    if field.endswith("gpu_hours"):
        return gpu_hours(value)
    if field in GPU_FIELDS:
        return gpus(value)
    return value


@register.filter
def signed_gpus(value: Number | None) -> str:
    """A change in GPUs with its sign: ``+4 GPUs``, ``-2 GPUs`` (with a minus sign), or
    ``no change``."""
    if value is None:
        return NO_VALUE
    if value == 0:
        return "no change"
    sign = "+" if value > 0 else MINUS
    return f"{sign}{gpus(abs(Decimal(str(value))))}"


# Seconds as a person reads them (``number_formats.duration``: the admin's too).
register.filter("duration", duration)


@register.filter
def signed_duration(seconds: Number | None) -> str:
    """A change in time with its sign: ``+12 min``, ``-2 h`` (a minus sign), ``no change``."""
    if seconds is None:
        return NO_VALUE
    if seconds == 0:
        return "no change"
    return ("+" if seconds > 0 else MINUS) + duration(abs(float(seconds)))


@register.filter
def percent(fraction: Number | None) -> str:
    """A fraction as a percentage: ``0.42`` -> ``42%``."""
    if fraction is None:
        return NO_VALUE
    return f"{plain_number(float(fraction) * 100, 0)}%"


@register.simple_tag
def local_time(moment: datetime | None, style: str = "datetime") -> SafeString:
    """A ``<time>`` element: the moment in ISO 8601 for the browser, which shows it in the
    viewer's zone (``frontend/js/time.js``), and in the active zone as the text until then.
    ``style``: ``datetime`` or ``date``."""
    if moment is None:
        return format_html("{}", NO_VALUE)
    shown = timezone.localtime(moment) if timezone.is_aware(moment) else moment
    text = shown.strftime("%Y-%m-%d") if style == "date" else shown.strftime("%Y-%m-%d %H:%M")
    zone = zone_name(shown)
    return format_html(
        '<time datetime="{}" data-local="{}">{} {}</time>',
        moment.isoformat(),
        style,
        text,
        zone,
    )


@register.simple_tag
def palette_css() -> str:
    """The palette's CSS custom properties (``palette.css_variables``), for a page rendered
    without the context processors that give every other page ``palette_css``: the server
    error page (``templates/500.html``)."""
    return PALETTE_CSS
