"""How gpupool writes a quantity for people, one format per quantity wherever it is read: the
pages' filters (``dashboard.templatetags.dashboard``) and a quota request's summary in the
messages and mails (``quotas.models.QuotaRequest.summary``); durations (``duration``) on the
pages and in the admin's list of cycles. GPUs to the milli-GPU
(``GPU_PLACES``), GPU-hours to the hundredth (``GPU_HOURS_PLACES``), thousands separated,
trailing zeros dropped; money to the cent (``MONEY_PLACES``), thousands separated, its cents
always written, a price per GPU-hour to the places the price list keeps (``PRICE_PLACES``)
where it has them (docs/dashboard.md, "Numbers with units"). The product has no currency
setting, so money is unit-less: its column or sentence names what it is ("per GPU-hour").
Stdlib only: a model reaches it without importing the dashboard."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

Number = int | float | Decimal
GPU_PLACES = 3  # GPUs: to the milli-GPU, the finest share a pod asks
GPU_HOURS_PLACES = 2  # GPU-hours: to the hundredth (36 GPU-seconds)
MONEY_PLACES = 2  # money: to the cent, cents always written (13,418.20)
PRICE_PLACES = 4  # a price per GPU-hour: what ``Flavor.hourly_price`` keeps (0.0125)
NO_VALUE = "\u2013"  # an en dash where there is no value
MINUS = "\u2212"  # the minus sign, as wide as the plus


def plain_number(value: Number | str, places: int = 2) -> str:
    """``value`` with thousands separators and at most ``places`` decimals, trailing zeros
    dropped (12, 0.5, 1,234.25); ``decimal.InvalidOperation`` for what is no number."""
    rounded = round(Decimal(str(value)), places)
    text = f"{rounded:,.{places}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in {"-0", ""} else text


def with_unit(value: Number | str | None, singular: str, plural: str, places: int = 2) -> str:
    """``value`` and its unit, singular for exactly 1 (``1 GPU``, ``0.5 GPUs``); an en dash
    for no value, and a value that is no number as it is."""
    if value is None or value == "":
        return NO_VALUE
    try:
        text = plain_number(value, places)
    except InvalidOperation:
        return str(value)
    return f"{text} {singular if text == '1' else plural}"


def money(value: Number | str, places: int = MONEY_PLACES) -> str:
    """``value`` as money: thousands separators and the cents always written (13,418.23,
    2.50), at most ``places`` decimals, zeros past the cents dropped (a price ``0.0125`` keeps
    its fourth place); ``decimal.InvalidOperation`` for what is no number."""
    rounded = round(Decimal(str(value)), max(places, MONEY_PLACES))
    whole, _, decimals = f"{rounded:,.{max(places, MONEY_PLACES)}f}".partition(".")
    text = f"{whole}.{decimals[:MONEY_PLACES]}{decimals[MONEY_PLACES:].rstrip('0')}"
    return text.removeprefix("-") if rounded == 0 else text


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """A whole count and its noun, singular for exactly one: ``1 pod``, ``3 pods``, ``0 nodes``
    (the client's own ``counted`` writes fractions too)."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def listed(items: Sequence[object]) -> str:
    """Items as a sentence lists them: ``1``, ``1 and 2``, ``1, 2, 4 and 8`` (no serial
    comma); an empty string for none."""
    words = [str(item) for item in items]
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} and {words[-1]}"


def duration(seconds: Number | None) -> str:
    """Seconds as a person reads them: ``45 ms`` (below a second), ``45 s``, ``12 min``,
    ``2 h 30 min``, ``3 d 4 h``."""
    if seconds is None:
        return NO_VALUE
    total = float(seconds)
    sign = MINUS if total < 0 else ""
    total = abs(total)
    if 0 < total < 1 and round(total * 1000) < 1000:
        return f"{sign}{plain_number(total * 1000, 0 if total >= 0.001 else 2)} ms"
    if total < 60:
        return f"{sign}{plain_number(total, 1)} s"
    minutes = round(total / 60)
    if minutes < 60:
        return f"{sign}{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{sign}{hours} h" + (f" {minutes} min" if minutes else "")
    days, hours = divmod(hours, 24)
    return f"{sign}{days} d" + (f" {hours} h" if hours else "")
