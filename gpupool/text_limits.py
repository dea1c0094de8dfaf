"""How gpupool refuses an input past its size, in one wording wherever it is said: a text
longer than its field takes, ``at most 400 characters, not 512``, and a list of more entries
than it takes, ``at most 15 entries, not 16`` (or, where the list's entries have a name of
their own, ``at most 8 pod sets, not 9``); numbers from 1,000 up with thousands separators,
as the product writes numbers elsewhere (``number_formats``). The API's fields, the pages'
forms and the models' own checks say it (``api.errors.word_length_refusals`` makes these the
messages of every text field's and list field's bound, with Django's validator filling in the
numbers), and so does the command-line client before it sends a request. Stdlib only: the
client reaches it without Django."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpupool.number_formats import plain_number


class SizeRefusal(str):
    """A refusal's template whose whole numbers are written with thousands separators when it
    is filled (``%``), as Django fills a validator's message with its ``params``
    (``limit_value``, ``show_value``: the bound and the size sent): ``%(limit_value)s`` reads
    ``10,000``. DRF fills its own ``{max_length}`` placeholders first (``str.format``), which
    these templates do not use: that keeps the template's kind."""

    __slots__ = ()

    def __mod__(self, params: Any) -> str:
        """The template filled, its whole numbers with separators."""
        if isinstance(params, Mapping):
            params = {key: _separated(value) for key, value in params.items()}
        return str.__mod__(self, params)

    def format(self, *args: Any, **kwargs: Any) -> SizeRefusal:
        """``str.format``, keeping the template a ``SizeRefusal`` (DRF's fill of a message)."""
        return SizeRefusal(str.format(self, *args, **kwargs))


def _separated(value: object) -> object:
    """A whole number with thousands separators (``12,345``, ``number_formats.plain_number``);
    anything else as it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return plain_number(value, places=0)
    return value


# Django's ``MaxLengthValidator`` fills in ``limit_value`` and ``show_value`` (the length sent).
TOO_LONG = SizeRefusal("at most %(limit_value)s characters, not %(show_value)s")


def too_many_of(noun: str) -> SizeRefusal:
    """The refusal of a list of more ``noun`` (plural: "pod sets") than it takes, to fill as
    ``TOO_LONG`` is filled."""
    return SizeRefusal(f"at most %(limit_value)s {noun}, not %(show_value)s")


# A list's entries, where they have no name of their own (a command's arguments, a pod set's
# further flavors): every list field's bound of the API (DRF's ``ListField``) says it.
TOO_MANY = too_many_of("entries")


def too_long(limit: int, length: int) -> str:
    """The refusal of a text of ``length`` characters where at most ``limit`` are taken."""
    return TOO_LONG % {"limit_value": limit, "show_value": length}


def too_many(limit: int, count: int, noun: str = "entries") -> str:
    """The refusal of a list of ``count`` ``noun`` where at most ``limit`` are taken."""
    return too_many_of(noun) % {"limit_value": limit, "show_value": count}
