"""The unit a flavor's capacity, quotas and use count in: the rule the pages
(``dashboard.facts``) and the API (``control.api``'s fragmentation) share, so the API need
not import the dashboard."""

from __future__ import annotations

from gpupool.inventory.choices import Sharing

# Singular (the plural adds an "s"), as ``gpupool nodes`` and the nodes API
# (``mig_instances``) say it: a MIG flavor's are the MIG instances of its profile, cut from
# its cards, never added to another flavor's GPUs.
GPU_UNIT = "GPU"
MIG_UNIT = "MIG instance"


def flavor_unit(sharing: str) -> str:
    """The unit of a flavor of ``sharing``: MIG instances for a MIG flavor, else GPUs."""
    return MIG_UNIT if sharing == Sharing.MIG else GPU_UNIT
