"""System checks of the utilisation settings (``manage.py check``, and every command that
runs the checks): ``GPUPOOL_UTILIZATION_SOURCE`` must name a source of the table."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error

from gpupool.utilization.sampling import unknown_source


def check_utilization_source(**kwargs: Any) -> list[CheckMessage]:
    """An error when ``GPUPOOL_UTILIZATION_SOURCE`` names no source of
    ``GPUPOOL_UTILIZATION_SOURCES`` (a typo would otherwise measure nothing, silently)."""
    problem = unknown_source()
    if problem is None:
        return []
    return [
        Error(
            problem,
            hint="Set GPUPOOL_UTILIZATION_SOURCE to one of those names, or to none for "
            "allocation alone.",
            id="utilization.E001",
        )
    ]
