"""System check of queue quotas (``manage.py migrate``, and ``manage.py check --database
default``): a quota with a fraction of a GPU on a flavor whose GPUs are given whole
(``validators.whole_gpu_errors``: exclusive and MIG flavors) is named, never changed. Such a
quota was set before the rule, or its flavor's sharing changed since; nothing rounds it (which
way would be the admin's call): an admin sets it again, to a whole number, in the admin site or
through the quotas API, which then accept only that."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.checks import CheckMessage
from django.db import DatabaseError

from gpupool.inventory.choices import Sharing
from gpupool.inventory.models import Flavor

# How many of the quotas a warning lists before it says how many more.
SHOWN = 10


def fractional_whole_gpu_quotas(using: str = "default") -> list[str]:
    """Each stored quota that breaks ``whole_gpu_errors``, as "queue/flavor", sorted (the
    flavor's own rule: ``Flavor.fractional_quotas``)."""
    flavors = Flavor.objects.using(using).exclude(sharing=Sharing.SHARED).order_by("name")
    found = [f"{queue}/{flavor.name}" for flavor in flavors for queue in flavor.fractional_quotas()]
    return sorted(found)


def check_whole_gpu_quotas(databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A warning naming the quotas with a fraction of a GPU on a flavor given whole, per
    database the checks are asked to look at (none: the check is not run, as Django's
    database checks)."""
    messages: list[CheckMessage] = []
    for alias in databases or ():
        try:
            found = fractional_whole_gpu_quotas(alias)
        except DatabaseError:  # no quotas table yet (before the first migrate)
            continue
        if not found:
            continue
        shown = ", ".join(found[:SHOWN]) + (
            f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
        )
        messages.append(
            checks.Warning(
                f"{len(found)} queue quota{'s' * (len(found) != 1)} in database {alias!r} "
                f"hold{'s' * (len(found) == 1)} a fraction of a GPU on a flavor whose GPUs "
                f"are given whole (exclusive or MIG): {shown}.",
                hint="They were set before the rule, or their flavor's sharing changed since; "
                "nothing rounds them. Set each again to a whole number (the admin site's queue "
                "quotas, or PUT /api/v1/queues/<name>/quotas/<flavor>/).",
                id="quotas.W001",
            )
        )
    return messages
