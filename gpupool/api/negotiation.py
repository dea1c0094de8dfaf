"""Content negotiation: DRF's, except that a ``?format=`` the resource does not offer is a 406
that names the formats it does offer, not a 404 "Not found." (a CSV asked of a list that has no
CSV looked like a wrong address)."""

from __future__ import annotations

from collections.abc import Iterable

from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer


class Negotiation(DefaultContentNegotiation):
    """``DefaultContentNegotiation`` with the refusal of an unknown format explained."""

    def filter_renderers(
        self, renderers: Iterable[BaseRenderer], format: str
    ) -> list[BaseRenderer]:
        """The renderers of ``format``; none: 406 naming the formats offered."""
        renderers = list(renderers)
        chosen = [renderer for renderer in renderers if renderer.format == format]
        if not chosen:
            offered = ", ".join(dict.fromkeys(renderer.format for renderer in renderers))
            raise NotAcceptable(f"format: {format!r} is not offered here; it answers {offered}")
        return chosen
