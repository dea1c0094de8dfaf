"""A pending workload's estimated start as the pages say it, against the pool's clock.

Estimates are refreshed off the cycle, about once a minute (``control.estimates``,
docs/control-loop.md "Estimated starts"), so the one a page reads may already lie before the
pool's now (``control.clock.pool_now``): it is then said in words ("due to start now"), not
printed as a time that has passed as if it were still to come. The same for the moment the
estimates' replay stopped looking ahead (``estimate_not_before``, read from the facts by
``workloads.queries.not_before_in`` alone)."""

from __future__ import annotations

from datetime import datetime

from django.utils.html import format_html
from django.utils.safestring import SafeString

from gpupool.control.estimates import refresh_words
from gpupool.dashboard.templatetags.dashboard import local_time
from gpupool.number_formats import NO_VALUE


def waits_for_pods_words(missing_pods: int) -> str:
    """What a gang that waits for pods the cluster has not made waits for, as the workload
    card, the My workloads table and the CLI say it: ``it waits for its pods (1 not created
    yet)``."""
    return f"it waits for its pods ({missing_pods} not created yet)"


def estimated_start_detail(
    estimated_start_at: datetime | None,
    estimate_not_before: datetime | None,
    now: datetime,
    missing_pods: object = None,
) -> SafeString:
    """The workload card's line on when a pending workload starts: ``estimated start <time>``;
    ``due to start now (estimated <time>; ...)`` once that time is before ``now``;
    ``estimated start not before <time>`` (the replay looked no further), or, once that has
    passed, that there is no estimate yet; ``estimated start unknown``. A gang that waits for
    pods the cluster has not made (``missing_pods``: its explanation's, reason ``gang``) has
    no time to promise (``control.estimates``): ``no estimated start: it waits for its pods
    (1 not created yet)``, as the CLI says it -- also when handed a time its row kept from
    before it lost a pod (the estimates' next refresh clears it)."""
    refreshed = refresh_words()
    if isinstance(missing_pods, int) and missing_pods > 0:
        return format_html("no estimated start: {}", waits_for_pods_words(missing_pods))
    if estimated_start_at is not None:
        if estimated_start_at < now:
            return format_html(
                "due to start now (estimated {}; estimates are refreshed {})",
                local_time(estimated_start_at),
                refreshed,
            )
        return format_html("estimated start {}", local_time(estimated_start_at))
    if estimate_not_before is not None:
        if estimate_not_before < now:
            return format_html(
                "no estimated start yet (the last estimate looked ahead to {}, which has "
                "passed; estimates are refreshed {})",
                local_time(estimate_not_before),
                refreshed,
            )
        return format_html("estimated start not before {}", local_time(estimate_not_before))
    return format_html("{}", "estimated start unknown")


def estimated_start_cell(
    estimated_start_at: datetime | None,
    now: datetime,
    estimate_not_before: datetime | None = None,
) -> SafeString:
    """The workloads table's "Estimated start" cell of a pending workload: its time, or
    ``due to start now`` with the time it was estimated for once that is before ``now``;
    without one, ``not before <time>`` where the estimates stopped looking ahead (the card's
    and ``gpupool why``'s words), ``none yet`` once that has passed."""
    if estimated_start_at is None:
        if estimate_not_before is not None:
            if estimate_not_before < now:
                return format_html(
                    'none yet <span class="muted">(looked ahead to {}, which has passed)</span>',
                    local_time(estimate_not_before),
                )
            return format_html("not before {}", local_time(estimate_not_before))
        return format_html("{}", NO_VALUE)
    if estimated_start_at < now:
        return format_html(
            'due to start now <span class="muted">(estimated {})</span>',
            local_time(estimated_start_at),
        )
    return local_time(estimated_start_at)
