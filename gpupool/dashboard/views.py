"""The dashboard's pages: server-rendered, with htmx refreshing their live parts.

Every page is a function decorated with ``dashboard_page(key)``: the user must be logged in
and hold one of the page's roles (``navigation.PAGES``; the API's roles, read with
``request_access``), else the page answers 403 and says who may open it. Times are shown in
the viewer's zone (the ``gpupool_tz`` cookie the browser sets; UTC until it has). A page's
live part is a partial template: an htmx request aimed at ``#live`` gets only that part.

Pages read through the functions the API uses (``quotas.impact``, ``quotas.shares``) and
change state only through the actions (``<app>/actions.py``), so the pages, the API and the
admin site cannot disagree.
"""

from __future__ import annotations

import dataclasses
import zoneinfo
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from functools import wraps
from typing import TYPE_CHECKING, Any, TypedDict, cast
from urllib.parse import unquote, urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView, redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, Prefetch, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.forms import ChoiceField, ModelChoiceField
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404, redirect, render, resolve_url
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from gpupool.accounting.choices import PreemptionReason
from gpupool.accounting.models import PreemptionEvent, RollUpState
from gpupool.accounting.periods import accounting_zone, local_day, month_start, next_month
from gpupool.accounting.preemptions_api import PreemptionEventViewSet
from gpupool.accounting.reports import (
    NO_TEAM,
    ReportQuery,
    attribution_report,
    cached_by_roll_up,
    capacity_report,
    cost_scope,
    written,
)
from gpupool.api.access import Access, request_access
from gpupool.api.permissions import tenant_scoped
from gpupool.audit.api import SYSTEM as AUDIT_SYSTEM
from gpupool.audit.api import AuditEventFilter
from gpupool.audit.models import AuditEvent
from gpupool.audit.words import action_label, field_label, names_a_user, object_kind
from gpupool.cli.subcommands.seed_demo import demo_password, demo_users
from gpupool.control.clock import pool_clock, pool_now
from gpupool.control.models import SchedulingCycle
from gpupool.control.queries import (
    allocated_by_queue,
    fragmentation_of,
    pool_figures,
    pool_policy,
    pool_snapshot,
    sampled_cycles,
)
from gpupool.control.snapshot import CLUSTER_UNHEALTHY, SnapshotError
from gpupool.dashboard import charts
from gpupool.dashboard.blocking import blocking_shape, gang_pods
from gpupool.dashboard.charts import series_colours
from gpupool.dashboard.estimates import (
    estimated_start_cell,
    estimated_start_detail,
    waits_for_pods_words,
)
from gpupool.dashboard.facts import (
    GPU_UNIT,
    UNITS,
    fact_rows,
    in_unit,
    signed_in_unit,
)
from gpupool.dashboard.fairness import Lender, Standing, Verdict, explain_fairness
from gpupool.dashboard.forms import (
    AuditFilterForm,
    CordonForm,
    CostRangeForm,
    DecisionForm,
    GpuHealthForm,
    QuotaRequestForm,
    WhatIfForm,
    WorkloadForm,
    form_problem_lines,
    form_problems,
    readable_field,
    refusal_detail,
    refusal_fields,
    refusal_lines,
)
from gpupool.dashboard.forms import field_label as form_field_label
from gpupool.dashboard.heatmap import (
    BROKEN,
    CORDONED,
    FREE,
    OTHER,
    cell_reasons,
    describe,
    domain_summaries,
    free_spread,
    gpu_rows,
    legend_counts,
    tenants_in,
)
from gpupool.dashboard.navigation import PAGES_BY_KEY, Page, home_page
from gpupool.dashboard.palette import (
    CORDONED_GPU,
    FREE_GPU,
    OTHER_SCHEDULER_GPU,
    UNHEALTHY_GPU,
    WORKLOAD_STATE_COLOURS,
    tenant_colours,
)
from gpupool.dashboard.templatetags.dashboard import (
    GPU_FIELDS,
    field_value,
    local_time,
)
from gpupool.dashboard.templatetags.dashboard import gpu_hours as gpu_hours_text
from gpupool.dashboard.templatetags.dashboard import gpus as gpus_text
from gpupool.inventory.actions import do_drain_node, do_set_gpu_health, do_set_node_cordoned
from gpupool.inventory.api import NODE_REASON_MAX_LENGTH
from gpupool.inventory.choices import NodeState
from gpupool.inventory.cordons import cordon_notes
from gpupool.inventory.drains import drain_waits, drain_words
from gpupool.inventory.models import (
    UNHEALTHY_REASON_MAX_LENGTH,
    Flavor,
    Gpu,
    Node,
    healthy_capacity,
    takes_pods,
)
from gpupool.inventory.queries import FlavorFragmentation
from gpupool.inventory.units import (
    MIG_UNIT,
    FlavorUnits,
    flavor_unit,
    flavor_units,
    flavor_units_by_id,
    freed_unit,
    mig_node_names,
)
from gpupool.number_formats import GPU_HOURS_PLACES, NO_VALUE, duration, with_unit
from gpupool.quotas.actions import (
    approval_refusal,
    decision_refusal,
    do_approve_and_apply_quota_request,
    do_create_quota_request,
    do_reject_quota_request,
    do_start_what_if,
    do_submit_quota_request,
    do_update_quota_request,
    do_withdraw_quota_request,
    quota_request_problems,
    withdrawal_refusal,
)
from gpupool.quotas.api import BudgetViewSet
from gpupool.quotas.choices import ACTIVE_WHAT_IF_STATES, QuotaRequestKind, QuotaRequestState
from gpupool.quotas.impact import current_deserved_shares, request_impact
from gpupool.quotas.models import (
    QUEUE_QUOTA_KEYS,
    PriorityBudget,
    PriorityClass,
    Queue,
    QueueQuota,
    QuotaRequest,
    covering,
)
from gpupool.quotas.queries import (
    QueueUsage,
    budget_rows,
    idle_policy_in_force,
    other_deciders,
    queue_usage,
    queues_led_by,
    queues_with_quotas,
    quota_request_rows,
    quota_rows,
    visible_quota_requests,
)
from gpupool.scheduler.explain import never_fits
from gpupool.scheduler.shares import QueueShare
from gpupool.scheduler.types import MILLI
from gpupool.tenancy.models import Tenant
from gpupool.utilization.queries import (
    hourly_utilization,
    left_out_flavors,
    named_tenants_of,
    queue_waste,
    shows_owners,
    tenant_utilization,
    top_wasters,
    workload_sparkline,
)
from gpupool.utilization.sampling import source_configured, unknown_source
from gpupool.utilization.windows import DEFAULT_WINDOW as UTILIZATION_DEFAULT_WINDOW
from gpupool.utilization.windows import WINDOWS as UTILIZATION_WINDOWS
from gpupool.workloads.actions import cancel_refusal, do_cancel_workload, may_cancel
from gpupool.workloads.api import (
    CancelInputSerializer,
    DryRunInputSerializer,
    WorkloadInputSerializer,
    WorkloadViewSet,
)
from gpupool.workloads.choices import (
    LIVE_STATES,
    PLACED_STATES,
    Origin,
    WorkloadState,
    is_unfinished,
)
from gpupool.workloads.models import (
    Placement,
    PodSet,
    Workload,
    gpu_equivalent,
    pods_waited_for,
)
from gpupool.workloads.queries import (
    AS_WRITTEN,
    NamesSeen,
    asks_by_workload,
    backoffs_in_force,
    dry_run_submission,
    eviction_drain_words,
    eviction_drains,
    eviction_refusal,
    explain,
    growths,
    never_fits_reason,
    node_drains,
    not_before_in,
    protections_in_force,
    queue_positions,
    refused_workloads,
    sees_preemptor,
    sees_preemptor_of,
    sentence,
    timeline_drain_words,
    total_gpus,
    transition_reason,
    unit_of_workload,
    workload_story,
)

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

TZ_COOKIE = "gpupool_tz"
LIVE_TARGET = "live"
AUDIT_PAGE_SIZE = 50
NODES_PAGE_SIZE = 100
WORKLOADS_PAGE_SIZE = 100
PREEMPTIONS_SHOWN = 50
CYCLES_SHOWN = 10
PREEMPTION_WINDOW = timedelta(days=14)
FRAGMENTATION_WINDOW = timedelta(hours=24)
BLOCKED_SHOWN = 50
OVERVIEW_WINDOW = timedelta(hours=24)
View = Callable[..., HttpResponse]


# ----------------------------------------------------------------------------- the frame


def viewer_zone(request: HttpRequest) -> zoneinfo.ZoneInfo | None:
    """The viewer's IANA time zone from the ``gpupool_tz`` cookie, if it names a real one
    (``time.js`` writes it URL-encoded: ``Europe%2FBerlin``)."""
    name = unquote(request.COOKIES.get(TZ_COOKIE, ""))
    if not name or len(name) > 64:
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None


def dashboard_page(key: str) -> Callable[[View], View]:
    """Make a view the page ``key``: logged-in users holding one of its roles (else 403),
    times in the viewer's zone, and the page known to the navigation."""
    page = PAGES_BY_KEY[key]

    def decorate(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return to_login(request)
            access = request_access(request)
            request.dashboard_page = page  # type: ignore[attr-defined]
            if not page.allows(access):
                return forbidden(request, page)
            zone = viewer_zone(request)
            if zone is None:
                return view(request, access, *args, **kwargs)
            with timezone.override(zone):
                return view(request, access, *args, **kwargs)

        return wrapped

    return decorate


def to_login(request: HttpRequest) -> HttpResponse:
    """Send an anonymous visitor to log in, and back here after. A live part polled by htmx
    after the session ended asks htmx to load the login page as a whole page
    (``HX-Redirect``), rather than getting it swapped into the part."""
    htmx = getattr(request, "htmx", None)
    if htmx:
        page = htmx.current_url_abs_path or request.get_full_path()
        return HttpResponseClientRedirect(
            f"{resolve_url(settings.LOGIN_URL)}?{urlencode({'next': page})}"
        )
    return redirect_to_login(request.get_full_path())


def forbidden(request: HttpRequest, page: Page, refused: str = "") -> HttpResponse:
    """The 403 page: which roles open this page (or, for ``refused``, what only admins
    may do on it), and where to go instead."""
    context = {"page": page, "roles": sorted(page.roles), "refused": refused}
    return render(request, "dashboard/forbidden.html", context, status=403)


def chart_time(moment: datetime) -> str:
    """A moment for a chart's time axis, in the viewer's zone (``charts.wall_times``; the
    axis names the zone: ``chart_zone``)."""
    return charts.wall_times([moment], timezone.get_current_timezone())[0]


def chart_zone() -> str:
    """The zone ``chart_time`` writes in, for the time axis's title (the tables' zone)."""
    return timezone.get_current_timezone_name()


def render_page(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    live: str | None = None,
    live_url: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """Render the page, or only its live part (``live``, a partial template) when htmx asks
    for ``#live``. The live part polls ``live_url``, by default the URL asked; a page that
    is also the answer to a POST names its own (the POST's URL does not answer GET)."""
    if live is not None and is_live_refresh(request):
        return render(request, live, context)
    frame = {"live_template": live, "live_url": live_url or request.get_full_path()}
    return render(request, template, context | frame, status=status)


def form_page_status(request: HttpRequest) -> int:
    """The status of a page with a form: a POST answered with the page, not a redirect, was
    refused, so 400 (the page again, with what was typed and the refusal beside its field, as
    the dashboard's other refused forms); else 200."""
    return 400 if request.method == "POST" else 200


def is_live_refresh(request: HttpRequest) -> bool:
    """Whether htmx asks only for the page's live part (``#live``, ``render_page``)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx and htmx.target == LIVE_TARGET)


def url_with_query(name: str, query: str | Mapping[str, Any] = "") -> str:
    """The URL of the page or API endpoint ``name`` (``reverse``) with ``query`` (its text, or
    a mapping to URL-encode, a list value a parameter repeated: ``state=a&state=b``), and no
    ``?`` when the query is empty."""
    url = reverse(name)
    text = query if isinstance(query, str) else urlencode(query, doseq=True)
    return f"{url}?{text}" if text else url


def not_understood(value: str, expected: str, instead: str) -> str:
    """What a page says of a value of its URL it did not take (``?month=2026-13``): what it
    expected, and what it shows instead. The templates show it beside the field."""
    return f"“{value}” was not understood: {expected}. Showing {instead} instead."


def choice_not_understood(asked: str, known: Iterable[str], what: str, instead: str) -> str:
    """What a page says of ``asked``, its URL's value for a ``what`` ("flavor"), when it is
    none of the values ``known`` (``?flavor=bogus``): ``not_understood``, naming the values it
    takes and what it shows instead. "" when nothing was asked or the value is known. The
    Queues, Fragmentation and Cluster pages' filters say so through this one function."""
    names = list(known)
    if not asked or asked in names:
        return ""
    expected = f"a {what} is one of {', '.join(names)}" if names else f"there is no {what} yet"
    return not_understood(asked, expected, instead)


class DashboardLoginView(LoginView):
    """The login page: every user (not only staff, as the admin site's); in DEBUG, the
    demo users that exist with their demo passwords."""

    template_name = "dashboard/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        """The form, and the demo users when DEBUG is on and they exist."""
        context = super().get_context_data(**kwargs)
        context["demo_users"] = demo_logins() if settings.DEBUG else []
        return context


def demo_logins() -> list[dict[str, str]]:
    """The demo users ``seed-demo`` made that exist here, with their demo passwords."""
    users = demo_users()
    existing = set(
        get_user_model()
        .objects.filter(username__in=[name for name, _ in users], is_active=True)
        .values_list("username", flat=True)
    )
    return [
        {"username": name, "password": demo_password(name), "role": role}
        for name, role in users
        if name in existing
    ]


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """``/``: the user's home page by role (admins Overview, finance Cost, leads and
    members My workloads); a user without any role is told how to get one."""
    page = home_page(request_access(request))
    if page is None:
        return render(request, "dashboard/no_role.html", status=200)
    return redirect(f"dashboard:{page.key}")


# ----------------------------------------------------------------------------- overview


@dashboard_page("overview")
def overview(request: HttpRequest, access: Access) -> HttpResponse:
    """The pool at a glance: capacity per flavor, workloads by state, pending work by
    reason and the last scheduling cycles."""
    flavors = list(flavors_with_nodes())  # the Cluster page's counts: cordoned, excluded
    healthy_of = [(flavor, healthy_capacity(flavor)) for flavor in flavors if flavor.node_count]
    # Each flavor's figures in its unit: a MIG flavor's MIG instances are never added to GPUs.
    units = {flavor.name: flavor_unit(flavor.sharing) for flavor in flavors}
    capacity = [
        {"flavor": flavor, "healthy": healthy, "unit": units[flavor.name]}
        for flavor, healthy in healthy_of
    ]
    # The live states only, counted on the (state, queue) index: a year of finished work
    # (B5: 500,000 workloads) took 0.2 s to count on every refresh; the reports count it.
    states = dict(
        Workload.objects.filter(state__in=LIVE_STATES)
        .values_list("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    pending = dict(
        Workload.objects.filter(state=WorkloadState.PENDING, explanation__isnull=False)
        .values_list("explanation__reason")
        .annotate(n=Count("id"))
        .values_list("explanation__reason", "n")
    )
    # The pending work of "Workloads now" that has no reason of the core's, so that the
    # panel adds up to it: work whose pods' labels cannot be used (explained with no reason:
    # ``control.record``), and work no cycle has looked at yet (submitted since the last one:
    # no explanation at all), the rest of the pending count (never below 0 should a cycle
    # explain work submitted between the two counts).
    unreadable = pending.pop("", 0)
    not_looked_at = max(
        0, states.get(WorkloadState.PENDING.value, 0) - sum(pending.values()) - unreadable
    )
    cycles = list(SchedulingCycle.objects.order_by("-started_at", "-id")[:CYCLES_SHOWN])
    now = pool_clock()  # the window is the pool's day: a simulated cluster runs ahead
    history = sampled_cycles(now - OVERVIEW_WINDOW, now)
    teams = team_of_leaf_queue()
    series = allocation_series(history, teams)
    latest = allocation_series(history[-1:], teams)
    utilisation = []
    for flavor, healthy in healthy_of:
        allocated = sum(values[-1] for (_, of), values in latest.items() if of == flavor.name)
        fraction = allocated / float(healthy) if healthy else None
        utilisation.append(
            {
                "flavor": flavor,
                "allocated": allocated,
                "fraction": fraction,
                "unit": units[flavor.name],
            }
        )
    names = {name: f"{name[0]} · {name[1]}" for name in series}
    pending_figure = charts.pending_reasons_figure(pending) if pending else None
    bars = pending_figure["data"][0] if pending_figure else {"y": [], "x": []}
    context = {
        "capacity": capacity,
        "utilisation": utilisation if history else [],
        "states": [
            (state.label, states.get(state.value, 0))
            for state in WorkloadState
            if state in LIVE_STATES
        ],
        "any_workloads": any(states.values()),
        "pending_figure": pending_figure,
        "pending_rows": list(zip(bars["y"], bars["x"], strict=True)),  # the chart's order
        "pending_unreadable": unreadable,
        "pending_not_looked_at": not_looked_at,
        "pending_total": sum(pending.values()) + unreadable + not_looked_at,
        "allocations": allocation_charts(history, series, names, units),
        "window_hours": round(OVERVIEW_WINDOW.total_seconds() / 3600),
        "cycles": cycles,
        "phases_figure": cycle_phases(cycles),
    }
    return render_page(
        request, "dashboard/overview.html", context, live="dashboard/partials/overview_live.html"
    )


def allocation_charts(
    history: Iterable[SchedulingCycle],
    series: dict[tuple[str, str], list[float]],
    names: dict[tuple[str, str], str],
    units: dict[str, str],
) -> list[dict[str, Any]]:
    """The Overview's allocation over time, a stacked figure per unit (GPUs, then MIG
    instances: never stacked together), each with its series' values at the last cycle."""
    colours = dict(zip(names.values(), tenant_colours(names.values()).values(), strict=True))
    times = [chart_time(cycle.pool_time()) for cycle in history]
    charts_of = []
    for unit in UNITS:
        of_unit = {
            key: values for key, values in series.items() if units.get(key[1], GPU_UNIT) == unit
        }
        if not of_unit and (unit != GPU_UNIT or series):
            continue  # (no series at all: the GPUs' heading says nothing was allocated)
        chart_id = "allocation-chart" if unit == GPU_UNIT else "mig-allocation-chart"
        charts_of.append(
            {
                "unit": unit,
                "id": chart_id,
                "figure_id": f"{chart_id}-figure",
                "figure": charts.allocation_area_figure(
                    times,
                    {names[key]: values for key, values in of_unit.items()},
                    colours,
                    zone=chart_zone(),
                    unit=f"{unit}s",
                )
                if of_unit
                else None,
                "now": [(names[key], values[-1]) for key, values in of_unit.items()],
            }
        )
    return charts_of


def team_of_leaf_queue() -> dict[str, str]:
    """Each leaf queue that belongs to a tenant, with the tenant's name (the queues whose
    allocations add up without counting a GPU twice)."""
    queues = list(Queue.objects.values_list("pk", "parent_id", "name", "tenant__name"))
    parents = {parent for _, parent, _, _ in queues if parent is not None}
    return {name: team for pk, _, name, team in queues if team and pk not in parents}


def allocation_series(
    cycles: Iterable[SchedulingCycle], teams: dict[str, str]
) -> dict[tuple[str, str], list[float]]:
    """GPUs allocated per (tenant, flavor) at each cycle, from the cycles' records; a series
    that is zero throughout is left out."""
    cycles = list(cycles)
    series: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0] * len(cycles))
    for index, cycle in enumerate(cycles):
        for queue, flavors in allocated_by_queue(cycle).items():
            if queue not in teams:
                continue
            for flavor, allocated in flavors.items():
                series[(teams[queue], flavor)][index] += allocated
    return {name: values for name, values in sorted(series.items()) if any(values)}


def cycle_phases(cycles: list[SchedulingCycle]) -> dict[str, Any] | None:
    """The figure of the cycles' durations by phase, oldest first (None without cycles)."""
    finished = [cycle for cycle in reversed(cycles) if cycle.finished_at is not None]
    if not finished:
        return None
    labels = [timezone.localtime(cycle.pool_time()).strftime("%H:%M:%S") for cycle in finished]
    phases = {
        phase: [getattr(cycle, f"{phase}_s") for cycle in finished]
        for phase in ("sync", "snapshot", "plan", "record", "apply")
    }
    return charts.cycle_phases_figure(labels, phases)


# ----------------------------------------------------------------------------- workloads


@dashboard_page("workloads")
def workloads(
    request: HttpRequest, access: Access, form: WorkloadForm | None = None
) -> HttpResponse:
    """The user's teams' workloads (admins: every workload), newest first, a page of them at a
    time (``?page=``, the state filter kept across pages), with where each waits and why; the
    form to submit one, with its live dry-run (``form``: one sent back with its refusals)."""
    rows = tenant_scoped(
        Workload.objects.order_by("-submitted_at", "-id"), access, WorkloadViewSet.tenant_field
    )
    asked = request.GET.get("state", "")
    state = asked if asked in WorkloadState.values else ""
    # The API's CSV of every workload the page would list, newest first as here.
    csv_query = {"format": "csv", "ordering": "-submitted_at"}
    if state:
        rows = rows.filter(state=state)
        csv_query["state"] = state
    queues = submit_queues(access)
    page = Paginator(rows, WORKLOADS_PAGE_SIZE).get_page(request.GET.get("page"))
    # The filter the pages keep, and the list's own URL: the live part polls the page shown
    # even when this page answers a failed submit (POST /workloads/submit/, which answers no
    # GET).
    kept = {"state": state} if state else {}
    shown = urlencode(kept | ({"page": page.number} if page.number > 1 else {}))
    list_url = url_with_query("dashboard:workloads", shown)
    shown_form = form or (WorkloadForm(queues=queues) if queues else None)
    context = {
        "workloads": workload_list(cast("QuerySet[Workload]", page.object_list), access),
        "page": page,
        "query": urlencode(kept),
        "csv_url": url_with_query("api:workload-list", csv_query),
        "state": state,
        "state_choices": list(WORKLOAD_STATE_LABELS.items()),
        # The state as the filter and the rows name it (its label), for the empty list.
        "state_label": WORKLOAD_STATE_LABELS.get(state, state),
        "state_not_understood": not_understood(
            asked, f"a state is one of {', '.join(WorkloadState.values)}", "every state"
        )
        if asked and not state
        else "",
        "all_tenants": access.admin,
        "none_in_state": none_in_state(state, access.admin) if state else "",
        "form": shown_form,
        "refused": refused_workloads(access),  # the API's rule (``workloads/refused/``)
    }
    if shown_form is not None and not is_live_refresh(request):  # (the form is not live)
        context["protection"] = submit_protection(shown_form, queues)
    return render_page(
        request,
        "dashboard/workloads.html",
        context,
        live="dashboard/partials/workloads_live.html",
        live_url=list_url,
        status=400 if form is not None else 200,
    )


# A workload's state as My workloads names it: in its filter, its rows and its empty list's
# heading (the choice's label, not its stored value).
WORKLOAD_STATE_LABELS: dict[str, str] = dict(WorkloadState.choices)

# How the list of one state says that no workload is in it (work is not submitted in a
# state: it waits, runs, has ended so): "No workload of your teams <words>."
NONE_IN_STATE: dict[str, str] = {
    WorkloadState.PENDING: "is pending",
    WorkloadState.ADMITTED: "is admitted",
    WorkloadState.RUNNING: "is running",
    WorkloadState.SUCCEEDED: "has succeeded",
    WorkloadState.FAILED: "has failed",
    WorkloadState.PREEMPTED: "was preempted and is not requeued",
    WorkloadState.CANCELLED: "was cancelled",
}


def none_in_state(state: str, admin: bool) -> str:
    """The empty list's sentence for ``state``: none of the user's teams' workloads (an
    admin's: any team's) is in it."""
    whose = "any team" if admin else "your teams"
    return f"No workload of {whose} {NONE_IN_STATE[state]}."


STATE_BADGES: dict[str, str] = {
    WorkloadState.RUNNING: "ok",
    WorkloadState.FAILED: "danger",
    WorkloadState.PREEMPTED: "danger",
    WorkloadState.PENDING: "warn",
}


def workload_list(rows: QuerySet[Workload], access: Access) -> list[dict[str, Any]]:
    """The rows of the My workloads table as values, each cell ready to print: four queries
    (the workloads with their names, what they ask -- GPUs and unit, ``asks_by_workload`` --,
    the ranks their positions are counted from, the pool's clock) and no model instance, so
    that the page's 100 rows cost a few milliseconds (B5). The sentence is said with the
    current position (``queries.sentence``); an estimated start before the pool's now is said
    to be due (``dashboard.estimates``); another team's workload a sentence names is unnamed
    to a reader not of it (``queries.NamesSeen``: one query, only when one is named); a
    sentence said again counts a MIG flavor's quantities in MIG instances (the flavors' units,
    ``FlavorUnits``: one query for the page, only when one is said again)."""
    seen = NamesSeen(access)
    units = FlavorUnits()
    zone = timezone.get_current_timezone()  # the sentences' moments, as the table's
    found = list(
        rows.values_list(
            "id",
            "namespace",
            "name",
            "submitter__username",
            "queue__name",
            "priority_class__name",
            "state",
            "queue_id",
            "explanation__queue_rank",
            "estimated_start_at",
            "explanation__reason",
            "explanation__detail",
            "explanation__facts",
            "submitted_at",
        )
    )
    positions = queue_positions(
        (row[0], row[7], row[8])
        for row in found
        if row[6] == WorkloadState.PENDING and row[8] is not None
    )
    asked = asks_by_workload(row[0] for row in found)
    now = pool_now()  # an estimate before it is said to be due (``dashboard.estimates``)
    listed = []
    for (
        workload_id,
        namespace,
        name,
        submitter,
        queue,
        klass,
        state,
        _queue_id,
        _rank,
        estimated,
        reason,
        detail,
        facts,
        submitted,
    ) in found:
        pending = state == WorkloadState.PENDING
        # A gang that waits for pods its controller has not made has no position: its cell
        # says what it waits for (``workloads.models.pods_waited_for``).
        missing = pods_waited_for(reason or "", facts) if pending else 0
        position = None if missing else positions.get(workload_id)
        listed.append(
            {
                "url": reverse("dashboard:workload", args=[namespace, name]),
                "name": f"{namespace}/{name}",
                "submitter": submitter,
                "queue": queue,
                "class": klass,
                "gpus": in_unit(asked[workload_id].gpus, asked[workload_id].unit),
                "state": WORKLOAD_STATE_LABELS.get(state, state),
                "badge": STATE_BADGES.get(state, ""),
                "position": f"none: {waits_for_pods_words(missing)}"
                if missing
                else NO_VALUE
                if position is None
                else position,
                "estimated": (
                    estimated_start_cell(None, now)
                    if missing or never_fits(facts or {})  # out of line: no time to promise
                    else estimated_start_cell(estimated, now, not_before_in(facts))
                )
                if pending
                else NO_VALUE,
                "pending": pending,
                "reason": reason or "",  # None: no explanation kept
                "detail": sentence(
                    reason or "", facts or {}, position, detail or "", seen, units=units, zone=zone
                )
                if pending
                else detail or "",
                "submitted": local_time(submitted),
            }
        )
    return listed


def submit_queues(access: Access) -> list[str]:
    """The names of the leaf queues the user may submit to: their teams' (admins: every
    team's)."""
    leaves = Queue.objects.filter(tenant__isnull=False, children__isnull=True)
    if not access.admin:
        leaves = leaves.filter(tenant__in=access.tenant_ids)
    return list(leaves.order_by("name").values_list("name", flat=True))


@require_POST
@dashboard_page("workloads")
def workload_dry_run(request: HttpRequest, access: Access) -> HttpResponse:
    """The live dry-run of the submit form (htmx, as the user types): quota, capacity and
    placement, and the first layer that fails, answered by the decision core on the snapshot
    of the last finished cycle (cached once per cycle: ``workloads.queries.dry_run_submission``
    through the API's own input shape). Nothing is submitted."""
    queues = submit_queues(access)
    form = WorkloadForm(request.POST, queues=queues)
    # The queue's protected window beside its field, swapped in as the queue changes.
    context: dict[str, Any] = {
        "answer": None,
        "errors": [],
        "protection": submit_protection(form, queues),
    }
    if not form.is_valid():  # each field named by its label, as the form's refusals are
        context["errors"] = form_problem_lines(form)
        return render(request, "dashboard/partials/dry_run.html", context)
    body = DryRunInputSerializer(data=form.body())
    context["errors_heading"] = "Refused:"  # the API's refusal, as a submission would get
    if not body.is_valid():
        context["errors"] = refusal_lines(body.errors, form.refusal_label)
        return render(request, "dashboard/partials/dry_run.html", context)
    try:
        context["answer"] = dry_run_submission(
            body.submission(), submitter=request.user, seen=NamesSeen(access)
        )
    except (ValidationError, PermissionDenied) as refusal:
        context["errors"] = refusal_lines(refusal_detail(refusal), form.refusal_label)
    except SnapshotError as failure:
        context["errors_heading"] = "Could not check now:"
        context["errors"] = [f"The pool cannot be planned now: {failure}"]
    return render(request, "dashboard/partials/dry_run.html", context)


@require_POST
@dashboard_page("workloads")
def workload_submit(request: HttpRequest, access: Access) -> HttpResponse:
    """Submit the form's workload through the API's input shape and the submission action;
    then its page. A refusal comes back onto the form, beside the fields it names."""
    form = WorkloadForm(request.POST, queues=submit_queues(access))
    if form.is_valid():
        body = WorkloadInputSerializer(data=form.body())
        if body.is_valid():
            never = never_fits_as_asked(body.submission(), request.user)
            try:
                workload = body.submission().submit(submitter=request.user)
            except ValidationError as refusal:
                form.add_refusal(refusal_detail(refusal))
            except PermissionDenied as refusal:
                form.add_error(None, refusal_text(refusal))
            else:
                name = workload.qualified_name()
                if never:  # queued (done, a success), but it will not run: a warning
                    messages.success(request, f"{name} is queued.")
                    messages.warning(
                        request,
                        f"{name} will not run as asked: {never_fits_reason(never)} It has no "
                        "place in line until its queue's quota or the pool changes.",
                    )
                else:
                    messages.success(
                        request,
                        f"{name} is queued: the next scheduling cycle starts it or says here "
                        "why it waits.",
                    )
                return redirect("dashboard:workload", workload.namespace, workload.name)
        else:
            form.add_refusal(body.errors)
    return workloads(request, form=form)


def never_fits_as_asked(submission: Any, submitter: Any) -> str:
    """Why the dry-run says a submission could never run as the pool is set up ("" when it
    could, or when the dry-run cannot answer: the submission's own refusal then speaks)."""
    try:
        # Only its never_fits is read: the core's sentence on the pool, naming no workload.
        return dry_run_submission(submission, submitter=submitter, seen=AS_WRITTEN).never_fits
    except (ValidationError, PermissionDenied, SnapshotError):
        return ""


def state_spans(workload: Workload, now: datetime) -> list[tuple[str, str, str]]:
    """The states a workload went through as (state, start, end) in ISO 8601, from its
    prefetched transitions; the state it is in lasts until ``now`` (or its own start, when a
    cluster's clock ahead of ``now`` stamped it) unless it ended (``is_unfinished``, the
    cancel's rule: a final state, or preempted and not requeued, which ends there too)."""
    moves = list(workload.transitions.all())
    spans = []
    for move, after in zip(moves, [*moves[1:], None], strict=True):
        if after is None and not is_unfinished(move.to_state, workload.finished_at):
            break
        end = max(now, move.at) if after is None else after.at
        spans.append((move.to_state, chart_time(move.at), chart_time(end)))
    return spans


@dashboard_page("workloads")
def workload_detail(
    request: HttpRequest, access: Access, namespace: str, name: str
) -> HttpResponse:
    """One workload's story: where it stands and why (position, estimated start, the loop's
    words and numbers), its timeline, its pod sets and placements, and each preemption it
    suffered with who caused it (the preemptor's queue and class; its name and owner only to
    admins and its team) and the GPU-hours lost. Scoped as the workloads API."""
    stories = tenant_scoped(workload_story(), access, WorkloadViewSet.tenant_field)
    workload = get_object_or_404(stories, namespace=namespace, name=name)
    now = pool_now()
    spans = state_spans(workload, now)
    events = list(workload.preempted_by.all())
    drains = eviction_drains(workload, events)  # who drained which node, and why (one query)
    # What each eviction freed and lost, in its unit (``freed_unit``, the Preemptions page's
    # rule): a MIG victim's in MIG instances and MIG instance-hours (one query).
    mig_nodes = mig_node_names(name for event in events for name in event.nodes or ())
    units = [freed_unit(list(event.nodes or ()), mig_nodes) for event in events]
    moves = list(workload.transitions.all())
    # In the tables' zone; another team's workloads unnamed to this team (``facts_seen_by``).
    # Its quantities in their flavors' units (a MIG flavor's MIG instances).
    explanation = explain(
        workload,
        timezone.get_current_timezone(),
        now,
        seen=NamesSeen(access),
        units=FlavorUnits(),
    )
    asked_unit = unit_of_workload(workload)  # MIG instances for work on MIG flavors only
    context = {
        "workload": workload,
        "gpus": total_gpus(workload),
        "unit": asked_unit,
        "explanation": explanation,
        "start_estimate": estimated_start_detail(
            explanation.estimated_start_at,
            explanation.estimate_not_before,
            now,
            # None for gpupool's own pods: it makes them at once, estimated as usual.
            pods_waited_for(explanation.reason, explanation.facts) or None,
        ),
        "facts": fact_rows(explanation.facts, asked_unit),  # its GPUs in its unit too
        "cancellable": cancellable(request.user, workload),
        # What cancelling it would do with its pods (its controller's, a Job's suspended).
        "cancel_pods": workload.pods_when_cancelled(held_gpus=workload.state in PLACED_STATES),
        "transitions": [  # each move's reason said once (``transition_reason``), its drain
            (move, transition_reason(move.to_state, move.reason), drain)
            for move, drain in zip(moves, timeline_drain_words(moves, events, drains), strict=True)
        ],
        # No chart while no state has lasted yet (just submitted: its axis would repeat one
        # moment, with no bar); the table below says the moment.
        "timeline_figure": (
            charts.workload_timeline_figure(spans, WORKLOAD_STATE_COLOURS, zone=chart_zone())
            if any(start != end for _, start, end in spans)
            else None
        ),
        "events": [
            (
                event,
                sees_preemptor(access, event),
                eviction_drain_words(drains.get(event.pk, ())),
                in_unit(event.gpus_freed, unit),
                unit_hours(event.lost_gpu_hours, unit),
            )
            for event, unit in zip(events, units, strict=True)
        ],
        # Never preempted: none lost, in the hours of its own unit (a MIG workload's "0 MIG
        # instance-hours", beside Asks' MIG instances).
        "lost": lost_by_unit(
            {"unit": unit, "lost_gpu_hours": event.lost_gpu_hours}
            for event, unit in zip(events, units, strict=True)
        )
        if events
        else unit_hours(0, asked_unit),
        "refusal": eviction_refusal(workload, access),  # an eviction a budget refused
        "placements": list(workload.placements.all()),
        "elastic": elastic_story(workload),
        "sparkline_figure": utilization_sparkline(workload),
        "submitted_by": submitted_by(workload),
    }
    return render_page(
        request,
        "dashboard/workload_detail.html",
        context,
        live="dashboard/partials/workload_detail_live.html",
    )


def elastic_story(workload: Workload) -> dict[str, Any] | None:
    """An elastic gang's size: the pods it must run together, has and runs now, and each
    time it grew (``workloads.queries.growths``); None for other work."""
    if workload.min_member is None:
        return None
    pods = sum(pod_set.count for pod_set in workload.pod_sets.all())
    placed = len(workload.placements.all())  # prefetched by ``workload_story``
    return {
        "minimum": workload.min_member,
        "pods": pods,
        "placed": placed,
        "short": workload.state in PLACED_STATES and placed < pods,
        "growths": growths(workload),
    }


def submitted_by(workload: Workload) -> str:
    """Who submitted work whose first transition names no person: its pods' maker for pods
    made in the cluster (``Workload.origin``: a bare pod, made with kubectl; a controller's),
    in its namespace; else the system (its transition's reason says which part of it: the
    demo's generator writes "submitted by the demo generator"). Never the scheduler, which
    only admits what others submit."""
    if workload.origin == Origin.BARE:
        return f"kubectl (namespace {workload.namespace})"
    if workload.origin == Origin.CONTROLLER:
        controller = workload.controller()  # "Job nlp/train-7"; empty when not kept
        if controller:
            return f"{controller} (a controller)"
        return f"a controller (namespace {workload.namespace})"
    return "the system"


def cancellable(user: Any, workload: Workload) -> bool:
    """Whether the workload's page offers ``user`` to cancel it: work not yet over
    (``cancel_refusal`` finds no reason: preempted work that stays preempted has ended), and
    ``may_cancel`` lets ``user`` -- the rules ``do_cancel_workload`` applies."""
    return cancel_refusal(workload) is None and may_cancel(user, workload)


@require_POST
@dashboard_page("workloads")
def workload_cancel(
    request: HttpRequest, access: Access, namespace: str, name: str
) -> HttpResponse:
    """Cancel the workload as the API's cancel does (the API's input shape,
    ``do_cancel_workload``: its submitter, a lead of its tenant or an admin; waiting or running
    work), recorded in its history with who and why; then its page, saying what happened or
    why nothing did. Scoped as the workloads API (another team's: 404)."""
    rows = tenant_scoped(
        Workload.objects.select_related("queue"), access, WorkloadViewSet.tenant_field
    )
    workload = get_object_or_404(rows, namespace=namespace, name=name)
    body = CancelInputSerializer(data=request.POST)
    try:
        if not body.is_valid():
            raise ValidationError(refusal_lines(body.errors))
        cancel = do_cancel_workload(
            workload, acting_user=request.user, reason=body.validated_data["reason"]
        )
    except (ValidationError, PermissionDenied) as refusal:
        # The state refused is the workload's own, which the refusal's sentence names: the
        # field is said as nothing (``forms.FIELD_WORDS``, the API's ``SELF_NAMING_FIELDS``).
        why = refusal_text(refusal)
        messages.error(request, f"{workload.qualified_name()} was not cancelled: {why}")
    else:
        # The API's cancel answer says the same (``outcome``): what becomes of its pods too.
        words = workload.cancelled_words(held_gpus=cancel.from_state in PLACED_STATES)
        messages.success(request, f"{workload.qualified_name()} is cancelled: {words}")
    return redirect("dashboard:workload", namespace, name)


# The workload page's sparkline: the workload's GPU utilisation over this last stretch.
SPARKLINE_WINDOW = timedelta(hours=24)


def utilization_sparkline(workload: Workload) -> dict[str, Any] | None:
    """The workload's mean GPU utilisation window by window over the last day (None: the
    utilisation source never saw it)."""
    until = pool_clock()
    points = workload_sparkline(workload, until - SPARKLINE_WINDOW, until)
    if not points:
        return None
    return charts.sparkline_figure(
        [chart_time(point["at"]) for point in points],
        [point["utilization"] for point in points],
        zone=chart_zone(),
    )


# ----------------------------------------------------------------------------- queues


def largest_flavor(flavors: Iterable[Flavor]) -> Flavor:
    """The flavor with the most GPUs (ties by name): the one a page shows first."""
    counts = dict(
        Gpu.objects.values_list("node__flavor_id")
        .annotate(n=Count("id"))
        .values_list("node__flavor_id", "n")
    )
    return min(flavors, key=lambda flavor: (-counts.get(flavor.pk, 0), flavor.name))


def queue_tree(queues: Iterable[Queue]) -> list[tuple[Queue, int]]:
    """The queues in tree order (parents before their children, siblings by name), each
    with its depth (roots 0)."""
    children: dict[int | None, list[Queue]] = defaultdict(list)
    known = {queue.pk for queue in queues}
    for queue in queues:
        parent = queue.parent_id if queue.parent_id in known else None
        children[parent].append(queue)
    ordered: list[tuple[Queue, int]] = []
    stack = [(queue, 0) for queue in sorted(children[None], key=lambda q: q.name, reverse=True)]
    while stack:
        queue, depth = stack.pop()
        ordered.append((queue, depth))
        kids = sorted(children.get(queue.pk, []), key=lambda q: q.name, reverse=True)
        stack.extend((kid, depth + 1) for kid in kids)
    return ordered


# A queue tree of more queues than this is shown folded on the Queues page (B5's year has
# 400: all of them, with their quotas, cost 0.1-0.2 s of CPU a request).
QUEUES_UNFOLDED_UP_TO = 60


@dataclass(frozen=True, slots=True)
class QueueFold:
    """Which queues of the tree the Queues page shows. Small trees are shown whole. A large
    one shows its roots and the children of its open queues: by default the ancestors of
    the viewer's teams' queues, else those ``?open=`` names (a name's ancestors open with it).
    """

    folded: bool
    open: frozenset[int]  # queues whose children are shown
    shown: frozenset[int]
    below: dict[int, int]  # each queue's number of queues under it, at any depth
    parents: dict[int, int | None]
    names: dict[int, str]

    def link(self, queue_id: int, flavor: Flavor | None) -> str:
        """The query string that opens the queue (closes it when open), keeping the rest."""
        names = {self.names[pk] for pk in self.open}
        name = self.names[queue_id]
        if queue_id in self.open:  # closing a queue closes what is open under it
            names -= {self.names[pk] for pk in self.open if self.is_under(pk, queue_id)}
        else:
            names.add(name)
        query = {"open": ",".join(sorted(names))}
        return "?" + urlencode(({"flavor": flavor.name} if flavor else {}) | query, safe=",")

    def is_under(self, queue_id: int, ancestor: int) -> bool:
        """Whether ``queue_id`` is ``ancestor`` or in its subtree."""
        seen: int | None = queue_id
        while seen is not None:
            if seen == ancestor:
                return True
            seen = self.parents.get(seen)
        return False


def fold_queues(asked: str | None, mine: Iterable[int]) -> QueueFold:
    """The fold of the whole tree, from one query of its (id, parent, name) and no model
    instance: ``asked`` is the ``open`` parameter (None when absent), ``mine`` the viewer's
    teams' queue ids."""
    tree = list(Queue.objects.values_list("pk", "parent_id", "name"))
    parents: dict[int, int | None] = {pk: parent for pk, parent, _ in tree}
    names = {pk: name for pk, _, name in tree}
    below: Counter[int] = Counter()
    for pk in parents:
        ancestor = parents[pk]
        while ancestor is not None and ancestor in parents:
            below[ancestor] += 1
            ancestor = parents[ancestor]
    if len(tree) <= QUEUES_UNFOLDED_UP_TO:
        everything = frozenset(parents)
        return QueueFold(False, everything, everything, dict(below), parents, names)
    wanted: set[int]
    if asked is None:  # the branches that lead to the viewer's queues
        wanted = {parent for pk in mine if (parent := parents.get(pk)) is not None}
    else:
        by_name = {name: pk for pk, name in names.items()}
        wanted = {by_name[name] for name in asked.split(",") if name in by_name}
    opened: set[int] = set()
    for pk in wanted:
        seen: int | None = pk
        while seen is not None and seen in parents:
            opened.add(seen)
            seen = parents[seen]
    if asked is None:  # by default the roots are open too: the first level shows
        opened |= {pk for pk, parent in parents.items() if parent is None and below[pk]}
    shown = frozenset(pk for pk, parent in parents.items() if parent is None or parent in opened)
    visible_open = frozenset(pk for pk in opened if pk in shown)
    return QueueFold(True, visible_open, shown, dict(below), parents, names)


@dashboard_page("queues")
def queues(request: HttpRequest, access: Access) -> HttpResponse:
    """The queue tree with each queue's quota of one flavor, its deserved share, and what it
    holds, borrows and lends now (every role sees every queue: tenants see each other at the
    queue level), and the idle policy in force (per class, with queue overrides). The rows and
    the usage are the queues API's (``quotas.queries``). A large tree comes folded
    (``fold_queues``): only the rows shown are read with their quotas."""
    flavors = list(Flavor.objects.order_by("name"))
    asked = request.GET.get("flavor", "")
    chosen = next((f for f in flavors if f.name == asked), None)
    if chosen is None and flavors:
        chosen = largest_flavor(flavors)
    flavor_not_understood = choice_not_understood(
        asked,
        (f.name for f in flavors),
        "flavor",
        f"{chosen.name}, the flavor with the most GPUs" if chosen else "the queues alone",
    )
    mine = Queue.objects.filter(tenant_id__in=access.tenant_ids).values_list("pk", flat=True)
    fold = fold_queues(request.GET.get("open"), list(mine) if access.tenant_ids else [])
    if not fold.shown:  # nothing to show, and the core plans no pool without a queue tree
        return render_page(
            request,
            "dashboard/queues.html",
            {
                "rows": [],
                "flavors": flavors,
                "flavor": chosen,
                "flavor_not_understood": flavor_not_understood,
                "idle": idle_policy_in_force(),
            },
            live="dashboard/partials/queues_live.html",
        )
    shares: dict[tuple[str, str], float] = {}
    shares_error = ""
    try:
        shares = current_deserved_shares()
    except SnapshotError as failure:
        shares_error = str(failure)
    usage = queue_usage()
    shown = list(queues_with_quotas().filter(pk__in=sorted(fold.shown)))
    unit = flavor_unit(chosen.sharing) if chosen else GPU_UNIT
    rows = []
    for queue, depth in queue_tree(shown):
        flavor_row = next(
            (row for row in quota_rows(queue, usage) if chosen and row.flavor == chosen.name),
            None,
        )
        under = fold.below.get(queue.pk, 0)
        quota = dataclasses.asdict(flavor_row) if flavor_row else None
        share = shares.get((queue.name, chosen.name)) if chosen else None
        rows.append(
            {  # dicts all the way: the template reads keys at once, attributes after a miss
                "queue": {
                    "name": queue.name,
                    "tenant": queue.tenant.name if queue.tenant else "",
                    "weight": queue.weight.normalize(),
                },
                "depth": depth,
                "indent": depth * 1.25,
                "quota": quota,
                "share": share,
                # Its figures as written, in the flavor's unit (a MIG flavor's: MIG instances).
                "in_unit": {
                    key: in_unit(value, unit)
                    for key, value in ((quota or {}) | {"share": share}).items()
                    if key != "flavor"
                },
                "mine": queue.tenant_id in access.tenant_ids,
                "under": under,
                "open": queue.pk in fold.open,
                "toggle": fold.link(queue.pk, chosen) if fold.folded and under else "",
            }
        )
    capacity = healthy_capacity(chosen) if chosen else None
    context = {
        "rows": rows,
        "folded": fold.folded,
        "open_query": (
            "&" + urlencode({"open": request.GET["open"]}, safe=",")
            if "open" in request.GET
            else ""
        ),
        "queue_count": len(fold.names),
        "verdicts": (
            [
                dataclasses.asdict(verdict)
                for verdict in fairness_verdicts(
                    chosen, usage, {queue.name for queue in shown}, capacity, core_free(chosen)
                )
            ]
            if chosen and capacity is not None and not usage.unavailable
            else []
        ),
        "flavors": flavors,
        "flavor": chosen,
        "flavor_not_understood": flavor_not_understood,
        "shares_error": shares_error,
        "usage": usage,
        "capacity": capacity,
        "capacity_in_unit": in_unit(capacity, unit),
        "unit": unit,
        "idle": idle_policy_in_force(),
    }
    return render_page(
        request, "dashboard/queues.html", context, live="dashboard/partials/queues_live.html"
    )


def core_free(flavor: Flavor) -> Decimal | None:
    """The flavor's free GPUs as the core counts them at the last finished cycle (what the
    Fragmentation page's "Free" card says); None when the pool cannot be planned now."""
    try:
        figures = pool_figures().value.fragmentation
    except SnapshotError:
        return None
    found = next((f for f in figures if f.flavor == flavor.name), None)
    return None if found is None else Decimal(str(found.free_gpus))


def fairness_verdicts(
    flavor: Flavor,
    usage: QueueUsage,
    shown: set[str],
    capacity: Decimal,
    free: Decimal | None = None,
) -> list[Verdict]:
    """The fairness explainer of the Queues page for one flavor: each team's leaf queue with
    a quota or a holding of it, with the workloads it has waiting for that flavor; of them,
    those whose rows are ``shown``, and every starved, waiting or borrowing one. ``capacity``
    is the flavor's healthy GPUs (what the leaves do not hold of it is free). Read as values,
    one query each for the leaves, their quotas and the waiting work, whatever the tree's
    size."""
    leaves = team_of_leaf_queue()
    levels = {  # every quota of the flavor (one per queue), then the leaves': no list of
        # 380 names sent as parameters (B5's year: 2.4 ms, 1.0 ms so)
        name: (level, guarantee, limit)
        for name, level, guarantee, limit in QueueQuota.objects.filter(flavor=flavor).values_list(
            "queue__name", "deserved", "guarantee", "queue__lending_limit"
        )
        if name in leaves
    }
    deserved = {name: level for name, (level, _, _) in levels.items()}
    waiting = dict(
        Workload.objects.filter(state=WorkloadState.PENDING, pod_sets__flavor=flavor)
        .values_list("queue__name")
        .annotate(n=Count("id", distinct=True))
        .values_list("queue__name", "n")
    )
    standings = []
    for name, team in leaves.items():
        held = usage.shares.get(name, {}).get(flavor.name)
        if name not in deserved and held is None:
            continue
        share = held or QueueShare(0, 0, 0)
        standings.append(
            Standing(
                queue=name,
                team=team,
                deserved=deserved.get(name) or Decimal(0),
                allocated=Decimal(share.allocated) / MILLI,
                borrowed=Decimal(share.borrowed) / MILLI,
                lent=Decimal(share.lent) / MILLI if name in deserved else Decimal(0),
                waiting=waiting.get(name, 0),
                lenders=tuple(
                    Lender(source.queue, Decimal(source.amount) / MILLI, source.unassigned)
                    for source in share.lenders
                ),
                guarantee=levels[name][1] if name in levels else Decimal(0),
                lending_limit=levels[name][2] if name in levels else None,
            )
        )
    if free is None:  # else the core's: a broken or cordoned GPU that work holds is
        # neither in the healthy capacity nor free, and capacity less holdings took it twice
        taken = sum((standing.allocated for standing in standings), Decimal(0))
        free = max(capacity - taken, Decimal(0))
    return explain_fairness(standings, shown, free=free, unit=flavor_unit(flavor.sharing))


# ----------------------------------------------------------------------------- cost


@dashboard_page("cost")
def cost(request: HttpRequest, access: Access) -> HttpResponse:
    """Per team, the month's (or the range's: ``?start=&end=``, the reports API's days) GPU-hours
    and cost in the attribution lines, the pool's four lines adding up to its healthy
    capacity, the trend of the last months and CSV links to the reports API for the same days
    (``accounting.reports``: the queries the API serves, scoped alike). A span not begun on the
    pool's clock says so; one not ended says it counts up to now."""
    now = pool_now()
    today = local_day(now, accounting_zone())
    month, month_not_understood = chosen_month(request.GET.get("month", ""), today)
    last_day = next_month(month) - timedelta(days=1)
    span_first, span_last = COST_MONTHS[0], next_month(COST_MONTHS[1]) - timedelta(days=1)
    asks_range = bool(request.GET.get("start") or request.GET.get("end"))
    range_form = CostRangeForm(
        request.GET if asks_range else None, first=span_first, last=span_last
    )
    ranged = asks_range and range_form.is_valid()
    start, end = (
        (range_form.cleaned_data["start"], range_form.cleaned_data["end"])
        if ranged
        else (month, last_day)
    )
    months = [month_start(end)]
    for _ in range(COST_TREND_MONTHS - 1):
        months.insert(0, month_start(months[0] - timedelta(days=1)))
    first = months[0]
    scope = cost_scope(access)
    span = ReportQuery(start=start, end=end, period="month", tenants=scope)
    label = f"{start.isoformat()}..{end.isoformat()}" if ranged else month.strftime("%Y-%m")

    def figures() -> dict[str, Any]:
        trend = ReportQuery(
            start=first, end=next_month(months[-1]) - timedelta(days=1), tenants=scope
        )
        # The trend is in GPU-hours: a MIG flavor's hours (MIG instance-hours, the rows of
        # its ``unit``) are left out, as from the teams' table and the four lines' total.
        trend_teams = attribution_report(trend, by=["tenant"], units=True).rows()
        trend_pool = capacity_report(trend, units=True).rows()
        teams = [row for row in trend_teams if row["unit"] == GPU_UNIT]
        pool_rows = [row for row in trend_pool if row["unit"] == GPU_UNIT]
        # The span's rows as the CSVs write them (``reports.written``), a span of months
        # summed per team and flavor: the CSVs' rows add up to the page's. Hours of a MIG
        # flavor count its MIG instances, never added to GPU-hours: the teams' table and the
        # four lines' total are of the whole-GPU flavors; each MIG flavor's rows are apart,
        # in MIG instance-hours; money adds up across every flavor (docs/cost.md).
        by_flavor = attribution_report(span, by=["tenant", "flavor"]).rows()
        pool_rows_span = capacity_report(span).rows()
        units = flavor_units(row["flavor"] for row in [*by_flavor, *pool_rows_span])
        mig = sorted({name for name, unit in units.items() if unit == MIG_UNIT})
        whole = [row for row in by_flavor if row["flavor"] not in mig]
        shown = summed(whole, "tenant", TEAM_COLUMNS)
        # (In MIG instance-hours, which their table's caption says, not each cell.)
        mig_teams = [
            team | {"flavor": name}
            for name in mig
            for team in summed(
                [row for row in by_flavor if row["flavor"] == name], "tenant", TEAM_COLUMNS
            )
        ]
        # Each flavor's hours in its unit, named once in its row (its ``unit``), not in each
        # of its five cells: "MIG instance-hours" five times overflowed a laptop's window.
        flavors = [
            row | {"unit": units.get(row["flavor"], GPU_UNIT)}
            for row in summed(pool_rows_span, "flavor", POOL_COLUMNS)
        ]
        # The queues of no team charged in the span (the row ``NO_TEAM`` names), by name.
        no_team = (
            [
                row["queue"]
                for row in attribution_report(span, by=["tenant", "queue"]).rows()
                if row["tenant"] is None and (row["used"] or row["reserved_idle"])
            ]
            if any(row["tenant"] is None for row in by_flavor)
            else []
        )
        return {
            "teams": shown,
            "mig_teams": mig_teams,
            "mig_flavors": mig,
            # Money adds up across flavors, whatever their unit.
            "charged_cost_all": sum((row["charged_cost"] for row in by_flavor), Decimal(0)),
            "no_team_queues": sorted(set(no_team)),
            "team_totals": column_totals(shown, TEAM_COLUMNS),
            "flavors": flavors,
            "pool_totals": column_totals(
                [row for row in flavors if row["flavor"] not in mig], POOL_COLUMNS
            ),
            "capacity_cost_all": sum((row["capacity_cost"] for row in flavors), Decimal(0)),
            "trend_figure": cost_trend([m.strftime("%Y-%m") for m in months], teams, pool_rows),
            "trend_leaves_out": sorted(
                {row["flavor"] for row in trend_pool if row["unit"] == MIG_UNIT}
            ),
        }

    # A year of roll-ups summed (0.1-0.2 s) changes only with the next roll-up.
    scoped = None if scope is None else sorted(scope)
    csv_query = {"start": start.isoformat(), "end": end.isoformat(), "format": "csv"}
    span_name = f"{start.isoformat()} to {end.isoformat()}" if ranged else month.strftime("%B %Y")
    rolled_until = (
        RollUpState.objects.filter(name="usage").values_list("rolled_until", flat=True).first()
    )
    context = cached_by_roll_up("cost-page", [label, scoped], figures) | {
        "month": month.strftime("%Y-%m"),
        "month_name": month.strftime("%B %Y"),
        "month_not_understood": month_not_understood,
        "months_shown": [first.isoformat()[:7] for first in COST_MONTHS],
        "range_form": range_form,
        "ranged": ranged,
        "range_instead": (
            f"Showing {month.strftime('%B %Y')} instead." if asks_range and not ranged else ""
        ),
        "span_name": span_name,
        "span_words": f"from {span_name}" if ranged else f"in {span_name}",
        "months_in_span": month_start(start) != month_start(end),
        # Whether the span has begun and ended on the pool's clock (its accounting day).
        "not_begun": start > today,
        "not_ended": start <= today <= end,  # (``end`` is a day included)
        "pool_now": now,
        "all_tenants": scope is None,
        # The hour the figures are rolled up to (they stop there, not at the pool's now).
        "rolled_until": rolled_until,
        "rolled_up": rolled_until is not None,
        "trend_months": COST_TREND_MONTHS,
        "csv": {
            "teams": url_with_query(
                "api:report-attribution-list", csv_query | {"by": "tenant", "period": "month"}
            ),
            "teams_by_day": url_with_query(
                "api:report-attribution-list", csv_query | {"by": "tenant", "period": "day"}
            ),
            "pool": url_with_query("api:report-capacity-list", csv_query | {"period": "month"}),
            "workloads": url_with_query("api:report-workloads-list", csv_query),
        },
        "prices": price_list(),
        "no_team": NO_TEAM,
    }
    return render(request, "dashboard/cost.html", context)


def summed(rows: list[dict[str, Any]], key: str, columns: Iterable[str]) -> list[dict[str, Any]]:
    """``rows`` (a report's, a row per month) as one row per ``key`` (tenant or flavor), by
    name (the row of no team last), with each of ``columns`` the sum of its figures as the
    reports write them (``reports.written``): a span's row is the sum of the CSV's rows. A
    figure the reports leave null (not measured: no utilisation source) stays null."""
    merged: dict[Any, dict[str, Any]] = {}
    for row in rows:
        into = merged.setdefault(row[key], {key: row[key]} | dict.fromkeys(columns, Decimal(0)))
        for name in columns:
            unknown = row[name] is None or into[name] is None
            into[name] = None if unknown else into[name] + written(row[name])
    return sorted(merged.values(), key=lambda row: (row[key] is None, row[key] or ""))


# The Cost page's trend: this many months, ending with the month shown.
COST_TREND_MONTHS = 12
TEAM_COLUMNS = (
    "used",
    "used_within_guarantee",
    "reserved_idle",
    "used_above_guarantee",
    "used_idle",
    "charged",
    "used_cost",
    "reserved_idle_cost",
    "charged_cost",
)
POOL_COLUMNS = (
    "capacity",
    "used_within_guarantee",
    "reserved_idle",
    "used_above_guarantee",
    "pool_idle",
    "capacity_cost",
)


# The months the Cost page counts (their first days): the trend's first month, and the days
# either side of the span (an accounting zone's offset moves a day's start by hours), stay
# inside the calendar of years 1 to 9999. (There is no month after December 9999 at all.)
COST_MONTHS = (date(2, 1, 1), date(9999, 11, 1))


def chosen_month(text: str, today: date) -> tuple[date, str]:
    """The first day of the month ``text`` names (``2026-03``), and ""; or, when ``text``
    names none or one out of ``COST_MONTHS``, the first day of ``today``'s month and why
    ``text`` was not taken (``not_understood``). No ``text``: ``today``'s month, silently."""
    this_month = month_start(today)
    if not text:
        return this_month, ""
    instead = this_month.strftime("%B %Y")
    try:
        month = date.fromisoformat(f"{text}-01") if len(text) == 7 else None
    except ValueError:
        month = None
    if month is None:
        return this_month, not_understood(text, "a month is written YYYY-MM (2026-03)", instead)
    first, last = COST_MONTHS
    if not first <= month <= last:
        expected = f"the months shown run from {first.isoformat()[:7]} to {last.isoformat()[:7]}"
        return this_month, not_understood(text, expected, instead)
    return month, ""


def column_totals(rows: list[dict[str, Any]], columns: Iterable[str]) -> dict[str, Decimal | None]:
    """Each column's sum over ``rows`` (a missing figure counts as none; a column a row has
    null, not measured, is null)."""
    return {
        name: None
        if any(name in row and row[name] is None for row in rows)
        else sum((row.get(name) or Decimal(0) for row in rows), Decimal(0))
        for name in columns
    }


def cost_trend(
    months: list[str], teams: list[dict[str, Any]], pool_rows: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The trend figure over ``months`` (``2026-03``, oldest first): each team's GPU-hours
    charged (used and reserved idle) per month, and the pool's healthy capacity; None when
    nothing of those months is rolled up."""
    if not teams and not pool_rows:
        return None
    position = {month: index for index, month in enumerate(months)}
    charged: dict[str, list[float]] = {}
    for row in teams:
        name = row["tenant"] or NO_TEAM
        values = charged.setdefault(name, [0.0] * len(months))
        values[position[row["period"]]] += float(row["used"] + row["reserved_idle"])
    capacity: list[float | None] = [None] * len(months)  # a gap where nothing is rolled up
    for row in pool_rows:
        index = position[row["period"]]
        capacity[index] = (capacity[index] or 0.0) + float(row["capacity"])
    ordered = dict(sorted(charged.items()))
    return charts.cost_trend_figure(months, ordered, capacity, tenant_colours(list(ordered)))


def price_list() -> list[dict[str, Any]]:
    """Each flavor's price per GPU-hour, healthy capacity and what that capacity costs an hour;
    a MIG flavor's price is per MIG instance-hour, its capacity its MIG instances (``unit``)."""
    prices = []
    for flavor in Flavor.objects.order_by("name"):
        healthy = healthy_capacity(flavor)
        unit = flavor_unit(flavor.sharing)
        prices.append(
            {
                "flavor": flavor,
                "healthy": healthy,
                "healthy_in_unit": in_unit(healthy, unit),
                "unit": unit,
                "hourly": healthy * flavor.hourly_price,
            }
        )
    return prices


# ----------------------------------------------------------------------------- utilisation

# The Utilisation page's windows (the last hours or days, by their name in ``?window=``)
# and its default are ``utilization.windows``': the API's and the command line's too.
WASTERS_SHOWN = 10


@dashboard_page("utilization")
def utilization(request: HttpRequest, access: Access) -> HttpResponse:
    """GPU use against allocation over the last hours (``utilization.queries``, the
    functions the API and the command line call): the pool's GPUs allocated against active,
    each visible team's, the teams' allocated / active / idle GPU-hours, and who held GPUs
    idle most -- workloads by name to admins, finance and their own team (``named_tenants_of``,
    the per-workload cost report's scope; owners to all but finance: ``shows_owners``), every
    team at queue level; CSV from the API."""
    chosen = request.GET.get("window", "")
    window = chosen if chosen in UTILIZATION_WINDOWS else UTILIZATION_DEFAULT_WINDOW
    window_not_understood = (
        not_understood(
            chosen,
            f"a window is one of {', '.join(UTILIZATION_WINDOWS)}",
            f"the last {UTILIZATION_DEFAULT_WINDOW}",
        )
        if chosen and chosen != window
        else ""
    )
    until = pool_clock()
    since = until - UTILIZATION_WINDOWS[window]
    scope = None if access.admin or access.finance else access.tenant_ids
    starts, allocated, active = hourly_utilization(since, until)
    visible = (
        set(allocated)
        if scope is None
        else set(Tenant.objects.filter(pk__in=scope).values_list("name", flat=True))
    )
    csv_window = {"since": since.isoformat(), "until": until.isoformat(), "format": "csv"}
    measured = source_configured()
    named_scope = named_tenants_of(access)  # whose workloads by name: the API's rule
    context = {
        "window": window,
        "windows": list(UTILIZATION_WINDOWS),
        "window_not_understood": window_not_understood,
        "since": since,
        "until": until,
        "all_tenants": scope is None,
        "named": named_scope is None,  # every team's workloads by name
        "teams": tenant_utilization(since, until, scope),
        # Without a source no GPU-hour was measured: nothing is listed as idle.
        "source_configured": measured,
        "unknown_source": unknown_source(),
        # Finance reads the lines, not the workloads (their pages answer it 403): no links.
        "wasters_linked": shows_owners(access),
        # Finance is not told who submitted them: no Owner column (it read a dash on every
        # row, as if nobody had).
        "wasters_owners": shows_owners(access),
        "wasters": (
            top_wasters(since, until, WASTERS_SHOWN, named_scope, owners=shows_owners(access))
            if measured and (named_scope is None or named_scope)
            else []
        ),
        "queues": queue_waste(since, until, WASTERS_SHOWN) if measured else [],
        "shown_limit": WASTERS_SHOWN,
        "any_allocation": bool(allocated),
        # The MIG flavors, whose MIG instance-hours the GPU-hours here leave out.
        "left_out": left_out_flavors(),
        **utilization_figures(starts, until, allocated, active, visible, measured=measured),
        "csv": {
            "teams": url_with_query("api:utilization-tenant-list", csv_window),
            "wasters": url_with_query("api:utilization-waster-list", csv_window | {"limit": 100}),
        },
    }
    return render_page(
        request,
        "dashboard/utilization.html",
        context,
        live="dashboard/partials/utilization_live.html",
    )


def utilization_figures(
    starts: list[datetime],
    until: datetime,
    allocated: dict[str, list[float]],
    active: dict[str, list[float]],
    visible: set[str],
    measured: bool = True,
) -> dict[str, Any]:
    """The page's two figures: the pool's GPUs allocated against active, and each visible
    team's; hours' GPU-hours turned into mean GPUs (the current hour over its part so far).
    Not ``measured`` (no utilisation source): allocation alone, nothing drawn as idle."""
    if not allocated:
        return {"pool_figure": None, "team_figure": None}
    lengths = [
        max((min(later, until) - start).total_seconds() / 3600, 1e-9)
        for start, later in zip(starts, [*starts[1:], until], strict=True)
    ]

    def mean(values: list[float]) -> list[float]:
        return [round(value / hours, 3) for value, hours in zip(values, lengths, strict=True)]

    times = [chart_time(start) for start in starts]
    pool_allocated = [sum(column) for column in zip(*allocated.values(), strict=True)]
    pool_active = [sum(column) for column in zip(*active.values(), strict=True)] or [0.0] * len(
        starts
    )
    # The capacity of the flavors whose GPU-hours are drawn (a MIG flavor's MIG instances are
    # not GPUs, and its usage is left out: ``utilization.queries.WHOLE_GPU_USAGE``).
    healthy = float(
        sum(
            healthy_capacity(flavor)
            for flavor in Flavor.objects.all()
            if flavor_unit(flavor.sharing) == GPU_UNIT
        )
    )
    teams = {name: mean(values) for name, values in allocated.items() if name in visible}
    return {
        "pool_figure": charts.allocated_vs_active_figure(
            times,
            mean(pool_allocated),
            mean(pool_active) if measured else None,
            healthy or None,
            zone=chart_zone(),
        ),
        "team_figure": (
            charts.team_utilization_figure(
                times,
                teams,
                (
                    {name: mean(active.get(name, [0.0] * len(starts))) for name in teams}
                    if measured
                    else None
                ),
                tenant_colours(list(teams)),
                zone=chart_zone(),
            )
            if teams
            else None
        ),
    }


# ----------------------------------------------------------------------------- preemptions


@dashboard_page("preemptions")
def preemptions(request: HttpRequest, access: Access) -> HttpResponse:
    """Preemptions of the user's teams' workloads and those their work caused (admins: all),
    newest first, with who preempted them -- the preemptor's queue and class, its name and
    owner only to admins and its own team (``workloads.queries.sees_preemptor``), as the
    victim's name only to its own team -- and the protection in force."""
    events = tenant_scoped(
        PreemptionEvent.objects.order_by("-at", "-id"), access, PreemptionEventViewSet.tenant_field
    )
    listed = (
        PreemptionEvent.objects.order_by("-at", "-id")
        if access.admin
        else PreemptionEvent.objects.filter(
            Q(victim_tenant__in=access.tenant_ids) | Q(preemptor_tenant__in=access.tenant_ids)
        ).order_by("-at", "-id")
    )
    shown = preemption_list(listed[:PREEMPTIONS_SHOWN], access)
    classes = list(PriorityClass.objects.order_by("-value", "name"))
    now = pool_clock()
    policy = pool_policy()
    # The last 14 days are today and the 13 before it, whole days in the viewer's zone.
    today = timezone.localtime(now).date()
    since = day_start(today - timedelta(days=PREEMPTION_WINDOW.days - 1))
    context = {
        "events": shown,
        "shown_limit": PREEMPTIONS_SHOWN,
        "csv_url": url_with_query("api:preemption-list", {"format": "csv"}),
        "csv_caused_url": url_with_query(
            "api:preemption-list", {"format": "csv", "side": "caused"}
        ),
        # What the shown preemptions cost, GPU-hours and MIG instance-hours apart.
        "lost": lost_by_unit(event for event, _ in shown if event["side"] != "caused"),
        "all_tenants": access.admin,
        "classes": classes,
        "protection_groups": protection_groups(),
        "history_figure": preemption_history(events, since, now),
        "window_days": PREEMPTION_WINDOW.days,
        "churn": preemption_churn(since, now),
        "backoffs": backoffs_in_force(now, policy.backoff),
        "backoff_policy": policy.backoff,
        "protections": protections_in_force(events, now, policy.victim_protection),
        "protection_policy": policy.victim_protection,
    }
    return render(request, "dashboard/preemptions.html", context)


def preemption_list(
    events: QuerySet[PreemptionEvent], access: Access
) -> list[tuple[dict[str, Any], bool]]:
    """The Preemptions page's rows as values, each with whether the viewer may see the
    preemptor's name (``sees_preemptor_of``): one query and no model instance (B5: 50 events
    with seven related rows each were a third of the page's CPU), and one of the drains of
    the admin evictions' nodes (``node_drains``). A row has the attributes
    ``partials/preemptor.html`` reads (``preemptor.name``, ``preemptor_queue.name``, ...),
    which side the viewer's teams were on (``side``: "suffered", "caused" or "both"), and the
    victim's name only where the viewer may see it (else "a workload of team nlp")."""
    reasons = dict(PreemptionReason.choices)
    rows = []
    values = list(
        events.values_list(
            "pk",
            "at",
            "reason",
            "victim__namespace",
            "victim__name",
            "victim_queue__name",
            "victim_tenant_id",
            "victim_tenant__name",
            "nodes",
            "preemptor__namespace",
            "preemptor__name",
            "preemptor__submitter__username",
            "preemptor_queue__name",
            "preemptor__priority_class__name",
            "preemptor_tenant_id",
            "preemptor_tenant__name",
            "gpus_freed",
            "lost_gpu_hours",
        )
    )
    drains = node_drains((row[0], row[2], row[1], row[8]) for row in values)
    # The nodes of a MIG flavor among the victims' (one query): a victim that held only those
    # freed MIG instances, said so ("2 MIG instances"), as the API's ``unit`` says it.
    mig_nodes = mig_node_names(name for row in values for name in row[8])
    for (
        pk,
        at,
        reason,
        victim_namespace,
        victim,
        victim_queue,
        victim_tenant,
        victim_team,
        nodes,
        preemptor_namespace,
        preemptor,
        submitter,
        preemptor_queue,
        preemptor_class,
        preemptor_tenant,
        preemptor_team,
        gpus_freed,
        lost,
    ) in values:
        ours = access.admin or victim_tenant in access.tenant_ids
        caused = preemptor_tenant is not None and preemptor_tenant in access.tenant_ids
        unit = freed_unit(nodes, mig_nodes)
        event = {
            "at": local_time(at),
            "url": reverse("dashboard:workload", args=[victim_namespace, victim]) if ours else "",
            "victim": f"{victim_namespace}/{victim}"
            if ours
            else f"a workload of team {victim_team}"
            if victim_team
            else "a workload of no team",
            "victim_queue": victim_queue,
            "victim_team": victim_team,
            "preemptor_team": preemptor_team,
            "side": "" if access.admin else _side(victim_tenant in access.tenant_ids, caused),
            "reason": reason,
            "get_reason_display": reasons.get(reason, reason),
            "nodes": nodes,
            "drain": eviction_drain_words(drains.get(pk, ())),
            "preemptor": None
            if preemptor is None
            else {
                "namespace": preemptor_namespace,
                "name": preemptor,
                "submitter": submitter and {"get_username": submitter},
                "priority_class": {"name": preemptor_class},
            },
            "preemptor_queue": {"name": preemptor_queue},
            "gpus_freed": in_unit(gpus_freed, MIG_UNIT)
            if unit == MIG_UNIT
            else gpus_text(gpus_freed),
            # In the unit's hours, as ``gpus_freed``: a MIG victim's in MIG instance-hours.
            "lost": unit_hours(lost, unit),
            "lost_gpu_hours": lost,
            "unit": unit,
        }
        rows.append((event, sees_preemptor_of(access, preemptor_tenant)))
    return rows


def unit_hours(value: Decimal | float | None, unit: str) -> str:
    """Hours of ``unit`` as the pages write them: GPU-hours as ``gpu_hours`` does
    (``12.50 GPU-h``), a MIG flavor's in MIG instance-hours (``3.00 MIG instance-hours``),
    never added to GPU-hours."""
    if unit == GPU_UNIT:
        return gpu_hours_text(value)
    return with_unit(value, f"{unit}-hour", f"{unit}-hours", places=GPU_HOURS_PLACES)


def lost_by_unit(events: Iterable[dict[str, Any]]) -> str:
    """The progress the Preemptions page's ``events`` (``preemption_list``'s rows) lost, in
    words: GPU-hours, and a MIG victim's MIG instance-hours apart, never added together."""
    gpu_hours, mig_hours = Decimal(0), Decimal(0)
    for event in events:
        if event["unit"] == MIG_UNIT:
            mig_hours += event["lost_gpu_hours"]
        else:
            gpu_hours += event["lost_gpu_hours"]
    said = [unit_hours(gpu_hours, GPU_UNIT)] if gpu_hours or not mig_hours else []
    if mig_hours:
        said.append(unit_hours(mig_hours, MIG_UNIT))
    return " and ".join(said)


def _side(suffered: bool, caused: bool) -> str:
    """Which side of a preemption the viewer's teams were on: their work was stopped
    ("suffered"), their work caused it ("caused"), or both."""
    return "both" if suffered and caused else "caused" if caused else "suffered"


# A group of queues of the same protection names them all when it has at most this many,
# else it says how many and folds their names.
PROTECTION_NAMES_SHOWN = 12


def protection_groups(names: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The teams' queues (those of ``names`` only, when given) grouped by their protected
    window (default, cap, reclaimable), each group with its queues' names: a row per setting
    in force, not per queue (B5's year has 379 team queues, all alike). One query of values."""
    groups: dict[tuple[int, int | None, bool], list[str]] = {}
    queues = Queue.objects.filter(tenant__isnull=False)
    if names is not None:
        queues = queues.filter(name__in=list(names))
    settings_of = queues.order_by("name").values_list(
        "name", "default_protected_runtime_s", "max_protected_runtime_s", "reclaimable"
    )
    for name, default, cap, reclaimable in settings_of:
        groups.setdefault((default, cap, reclaimable), []).append(name)
    return [
        {
            "queues": members,
            "folded": len(members) > PROTECTION_NAMES_SHOWN,
            "default_protected_runtime_s": default,
            "max_protected_runtime_s": cap,
            "reclaimable": reclaimable,
        }
        for (default, cap, reclaimable), members in sorted(
            groups.items(), key=lambda item: item[1][0]
        )
    ]


def protection_words(default: int, cap: int | None) -> str:
    """A queue's protected window as the Submit form says it (DESIGN 2, the protected-runtime
    contract): what a workload gets when it gives none, and how long it may ask at a class
    with no budget (past it the submission is refused: ``Workload.rule_errors``)."""
    given = f"{duration(default)} ({default} s)" if default else "none (0 s)"
    if cap is None:
        limit = "free at any length (no maximum)"
    elif cap == 0:
        limit = "any protection needs a budgeted priority class"
    else:
        limit = (
            f"at most {duration(cap)} ({cap} s) at a class with no budget; longer needs a "
            "budgeted priority class"
        )
    return f"{given} when left empty; {limit}."


def submit_protection(form: WorkloadForm, queues: list[str]) -> dict[str, Any]:
    """What the Submit form says beside its protected runtime (``partials/protected_limits.html``):
    the chosen queue's default and free maximum (``protection_words``; the queue the form was
    sent with, or the only one), else each of the user's queues' when they are few
    (``PROTECTION_NAMES_SHOWN``), else that the Preemptions page lists them (``elsewhere``).
    One query, of the chosen queue's settings or of the user's queues'."""
    chosen = str(form["queue"].value() or "")
    if chosen in queues:
        groups = protection_groups([chosen])
    elif len(queues) <= PROTECTION_NAMES_SHOWN:
        groups = protection_groups(queues)
    else:
        groups = []
    # Queues alike in their window said together (the groups part on ``reclaimable`` too).
    alike: dict[str, list[str]] = {}
    for group in groups:
        words = protection_words(
            group["default_protected_runtime_s"], group["max_protected_runtime_s"]
        )
        alike.setdefault(words, []).extend(group["queues"])
    said = [
        f"{'Queue' if len(names) == 1 else 'Queues'} {', '.join(sorted(names))}: {words}"
        for words, names in alike.items()
    ]
    return {"hint": " ".join(said), "elsewhere": not said}


def preemption_history(
    events: QuerySet[PreemptionEvent], since: datetime, now: datetime
) -> dict[str, Any] | None:
    """The figure of ``events`` per day (in the viewer's zone) and reason since ``since``."""
    per_day = (
        events.filter(at__gte=since, at__lte=now)
        .annotate(day=TruncDate("at", tzinfo=timezone.get_current_timezone()))
        .values_list("day", "reason")
        .annotate(n=Count("id"))
        .values_list("day", "reason", "n")
        .order_by()
    )
    found = list(per_day)
    if not found:
        return None
    first = timezone.localtime(since).date()
    days = [first + timedelta(days=offset) for offset in range(PREEMPTION_WINDOW.days)]
    position = {day: index for index, day in enumerate(days)}
    counts: dict[str, list[int]] = {}
    for day, reason, n in found:
        if day in position:
            counts.setdefault(reason, [0] * len(days))[position[day]] += n
    colours = series_colours(PreemptionReason.values)
    return charts.preemptions_over_time_figure(
        [day.isoformat() for day in days], dict(sorted(counts.items())), colours
    )


def preemption_churn(since: datetime, now: datetime) -> list[dict[str, Any]]:
    """Per team since ``since``: preemptions it suffered and the progress they cost (``lost``
    in words: GPU-hours, a MIG victim's MIG instance-hours apart, ``lost_by_unit``), and
    preemptions its work caused (teams see each other at this level, never workload names).
    Summed per team and set of nodes in the database, so a unit is read per set (one query
    of the MIG nodes among them)."""
    window = PreemptionEvent.objects.filter(at__gte=since, at__lte=now)
    by_nodes = list(
        window.filter(victim_tenant__isnull=False)
        .values_list("victim_tenant__name", "nodes")
        .annotate(n=Count("id"), lost=Sum("lost_gpu_hours"))
        .order_by()
    )
    mig_nodes = mig_node_names(name for _, nodes, _, _ in by_nodes for name in nodes or ())
    suffered: dict[str, dict[str, Any]] = {}
    for tenant, nodes, n, lost in by_nodes:
        row = suffered.setdefault(tenant, {"n": 0, "events": []})
        row["n"] += n
        unit = freed_unit(list(nodes or ()), mig_nodes)
        row["events"].append({"unit": unit, "lost_gpu_hours": lost or Decimal(0)})
    caused = dict(
        window.filter(preemptor_tenant__isnull=False)
        .values_list("preemptor_tenant__name")
        .annotate(n=Count("id"))
        .values_list("preemptor_tenant__name", "n")
    )
    return [
        {
            "tenant": tenant,
            "suffered": suffered.get(tenant, {}).get("n", 0),
            "lost": lost_by_unit(suffered.get(tenant, {}).get("events", [])),
            "caused": caused.get(tenant, 0),
        }
        for tenant in sorted(set(suffered) | set(caused))
    ]


# ----------------------------------------------------------------------------- fragmentation


@dashboard_page("fragmentation")
def fragmentation(request: HttpRequest, access: Access) -> HttpResponse:
    """Every GPU by NVLink domain and node, coloured by the tenant holding it or free, and per
    flavor the free, fragmented and stranded GPUs and the gangs that fit now in one domain:
    the core's view of the pool at the last finished cycle (``control.queries``, the figures
    the API's fragmentation endpoint serves)."""
    try:
        snapshot = pool_snapshot()
        # The core plans only a pool with a queue tree (its root); without one there are
        # no figures to read, and the heatmap alone shows.
        figures = pool_figures() if snapshot.value.snapshot.queues else None
    except SnapshotError as failure:
        return render_page(
            request,
            "dashboard/fragmentation.html",
            {"unavailable": str(failure)},
            live="dashboard/partials/fragmentation_live.html",
        )
    rows = gpu_rows(snapshot.value.snapshot)
    flavors = sorted({row.flavor for row in rows})
    wanted = request.GET.get("flavor", "")
    gpus_of: Counter[str] = Counter()  # physical GPUs: a MIG node's cards, not its instances
    for row in rows:
        gpus_of[row.flavor] += row.cards
    chosen = (
        wanted if wanted in flavors else min(flavors, key=lambda f: (-gpus_of[f], f), default="")
    )
    flavor_not_understood = choice_not_understood(
        wanted,
        flavors,
        "flavor",
        f"{chosen}, the flavor with the most GPUs" if chosen else "no GPU",
    )
    shown = [row for row in rows if row.flavor == chosen]
    unit = shown[0].unit if shown else GPU_UNIT  # a MIG flavor's figures: its MIG instances
    colours = {
        FREE: FREE_GPU,
        BROKEN: UNHEALTHY_GPU,
        CORDONED: CORDONED_GPU,
        OTHER: OTHER_SCHEDULER_GPU,
    }
    colours |= tenant_colours(tenants_in(rows))
    reasons = cell_reasons(
        shown,
        Gpu.objects.filter(healthy=False, node__flavor__name=chosen).values_list(
            "node__name", "index", "unhealthy_reason"
        ),
    )
    summaries = domain_summaries(shown)
    names = {summary.domain: summary.label for summary in summaries}  # a clique's short name
    figure = charts.gpu_heatmap_figure(
        [row.node for row in shown],
        [[cell.category for cell in row.cells] for row in shown],
        [[describe(row, cell, reasons, names) for cell in row.cells] for row in shown],
        colours,
        cell=unit,
    )
    counts = legend_counts(shown)  # the cells' own count: a shared GPU's free rest too
    spread = free_spread(summaries)
    pool_fragmentation = figures.value.fragmentation if figures else ()
    of_chosen = [f for f in pool_fragmentation if f.flavor == chosen]
    context = {
        "flavors": flavors,
        "flavor": chosen,
        "flavor_not_understood": flavor_not_understood,
        "unit": unit,
        "figure": figure if shown else None,
        "legend": [
            {"name": name, "colour": colour, "gpus": counts[name]}
            for name, colour in colours.items()
            if counts.get(name)
        ],
        # As dicts: the template reads a dict's keys directly, an object's attributes only
        # after a failed key lookup (227 domains of h100 on B5's year).
        "domains": [
            dataclasses.asdict(summary) | {"held_by": summary.held_by(), "label": summary.label}
            for summary in summaries
        ],
        # The "Free" card's where, from the table's own sums (they count the same GPUs).
        "free_spread": spread,
        "fragmentation": of_chosen,
        # Each gang column's pods, adding up to its GPUs (72 on 16-GPU nodes: 4 x 16 + 1 x 8)
        "gang_pods": [gang_pods(gang) for f in of_chosen for gang in f.gangs],
        "no_queues": figures is None,
        "cycle_id": snapshot.cycle_id,
        "as_of": snapshot.at,
        "trend_figure": fragmentation_trend(chosen, unit),
        "all_tenants": access.admin,
        "trend_hours": round(FRAGMENTATION_WINDOW.total_seconds() / 3600),
        "blocked": blocked_gangs(
            access,
            chosen,
            pool_fragmentation,
            # a gang bound to one domain is judged by the table's most free in one domain
            in_one_domain=max((summary.free for summary in summaries), default=0),
            nvlink=spread.nvlink,
            unit=unit,
        ),
    }
    return render_page(
        request,
        "dashboard/fragmentation.html",
        context,
        live="dashboard/partials/fragmentation_live.html",
    )


def fragmentation_trend(flavor: str, unit: str = GPU_UNIT) -> dict[str, Any] | None:
    """The figure of the flavor's free and fragmented GPUs (``unit``: a MIG flavor's MIG
    instances) and largest gang in one domain over the last day, from the cycles' samples
    (None without any)."""
    now = pool_clock()  # the pool's day, as the cycles' times (``sampled_cycles``)
    cycles = sampled_cycles(now - FRAGMENTATION_WINDOW, now, recording="fragmentation")
    points = [
        (chart_time(cycle.pool_time()), fragmentation_of(cycle)[flavor])
        for cycle in cycles
        if flavor in fragmentation_of(cycle)
    ]
    if not points:
        return None
    names = {"free": "free", "fragmented": "fragmented", "largest_gang": "largest gang in a domain"}
    return charts.fragmentation_trend_figure(
        [at for at, _ in points],
        {label: [sample.get(key, 0.0) for _, sample in points] for key, label in names.items()},
        zone=chart_zone(),
        unit=f"{unit}s",
    )


def blocked_gangs(
    access: Access,
    flavor: str,
    figures: Iterable[FlavorFragmentation],
    *,
    in_one_domain: float | None = None,
    nvlink: bool = True,
    unit: str = GPU_UNIT,
) -> list[dict[str, Any]]:
    """The user's teams' (admins: all) pending workloads of the flavor, each with the shape
    that blocks it, the largest first; one its explanation says can never run as asked
    (``explain.never_fits``) with that sentence. ``in_one_domain``: the most whole GPUs free
    together in one domain (the page's per-domain table); ``nvlink``: False when each of the
    flavor's domains is one node (``blocking.blocking_shape``)."""
    of_flavor = next((f for f in figures if f.flavor == flavor), None)
    if of_flavor is None:
        return []
    pending = tenant_scoped(
        Workload.objects.filter(state=WorkloadState.PENDING, pod_sets__flavor__name=flavor),
        access,
        WorkloadViewSet.tenant_field,
    ).distinct()
    found = list(  # as values, with the GPUs of the flavor's pod sets: no model instance
        pending.order_by("submitted_at", "id").values_list(
            "id",
            "namespace",
            "name",
            "explanation__reason",
            "submitted_at",
            "topology",
            "explanation__facts",
            "explanation__detail",
        )[:BLOCKED_SHOWN]
    )
    needed: dict[int, Decimal] = defaultdict(Decimal)
    shares: dict[int, Decimal] = {}  # the largest share of one GPU a pod asks (shared flavors)
    pods: dict[int, int] = defaultdict(int)  # its pods of the flavor
    pod_gpus: dict[int, int] = defaultdict(int)  # the most whole GPUs one of them asks
    for workload_id, count, gpus, milli in PodSet.objects.filter(
        workload_id__in=[row[0] for row in found], flavor__name=flavor
    ).values_list("workload_id", "count", "gpus", "gpu_milli"):
        needed[workload_id] += count * gpu_equivalent(gpus, milli)
        pods[workload_id] += count
        pod_gpus[workload_id] = max(pod_gpus[workload_id], gpus)
        if milli is not None:
            share = gpu_equivalent(gpus, milli)
            shares[workload_id] = max(share, shares.get(workload_id, share))
    rows = [
        {
            "workload": {
                "namespace": namespace,
                "name": name,
                "pending_reason": reason or "",  # None: no explanation kept
                "submitted_at": submitted,
            },
            "gpus": needed[workload_id],
            "why": blocking_shape(
                needed[workload_id],
                of_flavor,
                shares.get(workload_id),
                reason,
                topology=topology,
                pods=pods[workload_id],
                pod_gpus=pod_gpus[workload_id],
                never=(detail or "") if never_fits(facts or {}) else None,
                in_one_domain=in_one_domain,
                nvlink=nvlink,
                unit=unit,
            ),
        }
        for workload_id, namespace, name, reason, submitted, topology, facts, detail in found
    ]
    return sorted(rows, key=lambda row: (-row["gpus"], row["workload"]["submitted_at"]))


# ----------------------------------------------------------------------------- cluster


# The Cluster page's ``?show=``: which nodes it lists (none asked: every node).
CLUSTER_SHOWS = ("problems",)


@dashboard_page("cluster")
def cluster(request: HttpRequest, access: Access) -> HttpResponse:
    """Nodes and GPUs by flavor and NVLink domain, with health and cordons; admins cordon,
    uncordon and mark GPU health here."""
    return cluster_page(request, access, request.GET)


@dataclass(frozen=True)
class RefusedNodeForm:
    """A form of a node on the Cluster page that the server refused (``cluster_refused``):
    which form (``cordon``, ``drain``, ``gpu-health``), what was typed in it, and why."""

    node: str
    form: str
    reason: str
    index: str
    message: str


def cluster_page(
    request: HttpRequest,
    access: Access,
    params: QueryDict,
    *,
    refused: RefusedNodeForm | None = None,
) -> HttpResponse:
    """The Cluster page with the filters ``params`` (its ``GET``, or those a node's form was
    posted from); with ``refused``, that node's form open again as it was filled in, with
    why it was refused, answered 400."""
    nodes = Node.objects.select_related("flavor").prefetch_related(
        Prefetch("gpus", queryset=Gpu.objects.order_by("index"))
    )
    flavors = list(Flavor.objects.order_by("name"))
    flavor_name = params.get("flavor", "")
    show = params.get("show", "")
    flavor_not_understood = choice_not_understood(
        flavor_name, (f.name for f in flavors), "flavor", "every flavor"
    )
    show_not_understood = choice_not_understood(
        show, CLUSTER_SHOWS, "choice of nodes (show)", "every node"
    )
    flavor_name = "" if flavor_not_understood else flavor_name
    show = "" if show_not_understood else show
    if flavor_name:
        nodes = nodes.filter(flavor__name=flavor_name)
    if show == "problems":
        # Every node that cannot give all its GPUs: one that takes no pods (cordoned, excluded
        # by the cluster -- not Ready, unreachable --, gone: ``takes_pods``), or a broken GPU.
        broken = Gpu.objects.filter(healthy=False).values("node_id")
        nodes = nodes.filter(~takes_pods() | Q(pk__in=broken))
    nodes = nodes.order_by("flavor__name", "nvlink_domain", "name")
    query = params.urlencode()  # the filters, kept by the page's links and its node forms
    paginator = Paginator(nodes, NODES_PAGE_SIZE)
    page = paginator.get_page(params.get("page"))
    groups: list[dict[str, Any]] = []
    # What a drain of each node would evict (its confirmation says so): the workloads placed
    # there, one query for the page's nodes.
    placed = (
        dict(
            Workload.objects.filter(placements__node__in=page.object_list, state__in=PLACED_STATES)
            .values_list("placements__node_id")
            .annotate(n=Count("id", distinct=True))
            .values_list("placements__node_id", "n")
            .order_by()
        )
        if access.admin
        else {}
    )
    # What each draining node waits on: evictions a disruption budget refused (one read).
    drains = drain_waits(n.pk for n in page.object_list if n.state == NodeState.DRAINING)
    # Who cordoned each cordoned node, when and why (the audit log's: one read), or that the
    # cluster cordoned it.
    cordons = cordon_notes(page.object_list)
    for node in page.object_list:
        if not groups or groups[-1]["flavor"] != node.flavor:
            groups.append({"flavor": node.flavor, "domains": []})
        domains = groups[-1]["domains"]
        if not domains or domains[-1]["name"] != node.nvlink_domain:
            domains.append({"name": node.nvlink_domain, "nodes": []})
        state = node.state
        drain = drains.get(node.pk)
        health = node.health_reasons(drain)
        domains[-1]["nodes"].append(
            {
                "node": node,
                "state": state.value,
                # A draining node whose evictions were refused says so, not "being evicted".
                "state_label": drain_words(drain) if drain and drain.refused else state.label,
                "health": health,
                "cordon": cordons.get(node.pk),
                "workloads": placed.get(node.pk, 0),
                "refused": [  # (admins) each with the workload page's words for its refusal
                    (workload, eviction_refusal(workload, access))
                    for workload in (drain.refused if drain and access.admin else ())
                ],
                "evicting": drain.others if drain else 0,
                # (admins) this node's form the server refused, as it was filled in
                "retry": refused if refused is not None and refused.node == node.name else None,
            }
        )
    for group in groups:
        group["own_domains"] = all(len(domain["nodes"]) == 1 for domain in group["domains"])
    context = {
        "summary": cluster_summary(),
        "groups": groups,
        "page": page,
        "flavors": flavors,
        "flavor_name": flavor_name,
        "flavor_not_understood": flavor_not_understood,
        "show": show,
        "show_not_understood": show_not_understood,
        "can_change": access.admin,
        "query": query,
        # A GPU the cluster does not offer cannot be marked healthy (``do_set_gpu_health``).
        "cluster_unhealthy": CLUSTER_UNHEALTHY,
        # The reason inputs' maxlength: the bounds their forms (CordonForm, GpuHealthForm)
        # and the nodes API refuse past.
        "node_reason_max_length": NODE_REASON_MAX_LENGTH,
        "gpu_reason_max_length": UNHEALTHY_REASON_MAX_LENGTH,
        "refused": refused,
        # (its node may be on another page of nodes, or filtered out)
        "refused_on_page": refused is not None
        and any(node.name == refused.node for node in page.object_list),
    }
    return render_page(
        request,
        "dashboard/cluster.html",
        context,
        live="dashboard/partials/cluster_live.html",
        # The page's own URL, not a node form's (which answers no GET).
        live_url=url_with_query("dashboard:cluster", query),
        status=400 if refused else 200,
    )


class NodeCounts(TypedDict):
    """What ``flavors_with_nodes`` counts of a flavor's nodes."""

    node_count: int
    cordoned_nodes: int
    excluded_nodes: int


def flavors_with_nodes() -> QuerySet[WithAnnotations[Flavor, NodeCounts]]:
    """The flavors by name, each with its nodes counted (``node_count``), its cordoned ones
    (``cordoned_nodes``) and those the cluster excludes (``excluded_nodes``: not cordoned
    here, but not Ready, unreachable or gone there: no healthy capacity, ``takes_pods``).
    The Cluster page's and the Overview's counts, one rule."""
    return Flavor.objects.annotate(
        node_count=Count("nodes", distinct=True),
        cordoned_nodes=Count("nodes", filter=Q(nodes__cordoned=True), distinct=True),
        excluded_nodes=Count(
            "nodes",
            filter=Q(nodes__cordoned=False) & ~Q(nodes__cluster_exclusion=""),
            distinct=True,
        ),
    ).order_by("name")


def cluster_summary() -> list[dict[str, Any]]:
    """Per flavor: nodes, cordoned nodes, nodes the cluster excludes (not Ready, gone: no
    healthy capacity, ``takes_pods``), GPUs, unhealthy GPUs and healthy capacity
    (``flavors_with_nodes``)."""
    gpus = dict(
        Gpu.objects.values_list("node__flavor_id")
        .annotate(n=Count("id"))
        .values_list("node__flavor_id", "n")
    )
    broken = dict(
        Gpu.objects.filter(healthy=False)
        .values_list("node__flavor_id")
        .annotate(n=Count("id"))
        .values_list("node__flavor_id", "n")
    )
    rows = []
    for flavor in flavors_with_nodes():
        if not flavor.node_count:
            continue
        capacity = healthy_capacity(flavor)
        rows.append(
            {
                "flavor": flavor,
                "gpus": gpus.get(flavor.pk, 0),
                "unhealthy": broken.get(flavor.pk, 0),
                "healthy_capacity": capacity,
                # A MIG flavor's capacity is its MIG instances, cut from its physical GPUs.
                "unit": flavor_unit(flavor.sharing),
                "capacity_in_unit": in_unit(capacity, flavor_unit(flavor.sharing)),
            }
        )
    return rows


def back_to_cluster(request: HttpRequest) -> HttpResponseRedirect:
    """Back to the cluster page with the filters the form was posted from."""
    return HttpResponseRedirect(url_with_query("dashboard:cluster", request.POST.get("query", "")))


def cluster_refused(
    request: HttpRequest, access: Access, node: Node, form: str, message: str
) -> HttpResponse:
    """The Cluster page again, with the filters the refused form of ``node`` was posted from,
    that form open and filled in as it was sent (its reason, its GPU) and ``message`` saying
    why it was refused (400): not a redirect that loses what was typed. The message ends a
    sentence, as the page's next one ("Its form is below") starts another."""
    refused = RefusedNodeForm(
        node=node.name,
        form=form,
        reason=request.POST.get("reason", ""),
        index=request.POST.get("index", ""),
        message=message if message.endswith((".", "?", "!")) else f"{message}.",
    )
    return cluster_page(request, access, QueryDict(request.POST.get("query", "")), refused=refused)


@require_POST
@dashboard_page("cluster")
def cluster_cordon(request: HttpRequest, access: Access, name: str) -> HttpResponse:
    """Cordon or uncordon a node (admins; the action refuses anyone else); uncordoning a
    draining node ends its drain."""
    if not access.admin:
        return forbidden(request, PAGES_BY_KEY["cluster"], "Only admins cordon and uncordon nodes.")
    node = get_object_or_404(Node, name=name)
    form = CordonForm(request.POST)
    if not form.is_valid():
        return cluster_refused(
            request, access, node, "cordon", f"{node.name} was not changed: {form_problems(form)}"
        )
    cordoned = form.cleaned_data["cordoned"]
    was = node.state
    try:
        do_set_node_cordoned(
            node, cordoned=cordoned, acting_user=request.user, reason=form.cleaned_data["reason"]
        )
    except ValidationError as refusal:
        why = refusal_text(refusal, lambda field: form_field_label(form, field))
        return cluster_refused(
            request, access, node, "cordon", f"{node.name} was not changed: {why}"
        )
    verb = "cordoned: nothing new will be placed on it" if cordoned else "uncordoned"
    if was == NodeState.DRAINING and not cordoned:
        verb = "no longer draining, and uncordoned: nothing more is evicted from it"
    elif was == NodeState.DRAINED and not cordoned:
        verb = "uncordoned after its drain: back in service"
    messages.success(request, f"{node.name} is {verb}.")
    return back_to_cluster(request)


@require_POST
@dashboard_page("cluster")
def cluster_drain(request: HttpRequest, access: Access, name: str) -> HttpResponse:
    """Drain a node (admins), confirmed on the Cluster page with an optional reason kept in
    the audit log (as cancelling a workload, and the nodes API's drain): cordon it and have
    the control loop evict its workloads (``do_drain_node``; reason ``admin``, disruption
    budgets honoured)."""
    if not access.admin:
        return forbidden(request, PAGES_BY_KEY["cluster"], "Only admins drain nodes.")
    node = get_object_or_404(Node, name=name)
    form = CordonForm(request.POST)
    if not form.is_valid():
        return cluster_refused(
            request, access, node, "drain", f"{node.name} was not drained: {form_problems(form)}"
        )
    was = node.state
    do_drain_node(node, acting_user=request.user, reason=form.cleaned_data["reason"])
    if was in (NodeState.DRAINING, NodeState.DRAINED):  # (the action changes nothing then)
        messages.info(request, f"{node.name} was already {was.value}: nothing was changed.")
        return back_to_cluster(request)
    messages.success(
        request,
        f"{node.name} is draining: it is cordoned, and the control loop evicts its workloads "
        "at its next cycles.",
    )
    return back_to_cluster(request)


@require_POST
@dashboard_page("cluster")
def cluster_gpu_health(request: HttpRequest, access: Access, name: str) -> HttpResponse:
    """Mark one GPU of a node healthy or unhealthy (admins; unhealthy says why)."""
    if not access.admin:
        return forbidden(request, PAGES_BY_KEY["cluster"], "Only admins set a GPU's health.")
    node = get_object_or_404(Node, name=name)
    form = GpuHealthForm(request.POST)
    if not form.is_valid():
        return cluster_refused(
            request,
            access,
            node,
            "gpu-health",
            f"{node.name} was not changed: {form_problems(form)}",
        )
    data = form.cleaned_data
    gpu = node.gpus.filter(index=data["index"]).first()
    if gpu is None:
        return cluster_refused(
            request, access, node, "gpu-health", f"{node.name} has no GPU {data['index']}."
        )
    try:
        do_set_gpu_health(
            gpu, healthy=data["healthy"], reason=data["reason"], acting_user=request.user
        )
    except ValidationError as refusal:
        why = refusal_text(refusal, lambda field: form_field_label(form, field))
        return cluster_refused(request, access, node, "gpu-health", f"{gpu} was not changed: {why}")
    if data["healthy"]:
        messages.success(request, f"{node.name} GPU {gpu.index} is healthy again.")
        return back_to_cluster(request)
    holders = workloads_on_gpu(node, gpu.index)
    held = (
        f" {', '.join(holders)}, which {'holds' if len(holders) == 1 else 'hold'} it, "
        f"{'keeps' if len(holders) == 1 else 'keep'} running until "
        f"{'it ends' if len(holders) == 1 else 'they end'} or you drain {node.name}."
        if holders
        else ""
    )
    messages.success(
        request,
        f"{node.name} GPU {gpu.index} is unhealthy ({data['reason']}): nothing new is placed "
        f"on it.{held}",
    )
    return back_to_cluster(request)


def workloads_on_gpu(node: Node, index: int) -> list[str]:
    """The placed workloads (admitted or running) one of whose pods holds GPU ``index`` of
    ``node``, as ``namespace/name``, by name: marking the GPU unhealthy evicts none of them
    (the device plugin leaves a running pod be), which the admin is told."""
    placements = Placement.objects.filter(node=node, workload__state__in=PLACED_STATES).values_list(
        "workload__namespace", "workload__name", "gpu_indices"
    )
    return sorted(
        {f"{namespace}/{name}" for namespace, name, indices in placements if index in indices}
    )


def refusal_text(
    refusal: PermissionDenied | ValidationError, label: Callable[[str], str] = readable_field
) -> str:
    """An action's refusal in one line, each field named by ``label`` (a page's label for it;
    by default its path in words, ``forms.readable_field``; "" names none)."""
    return "; ".join(
        f"{label(name)}: {' '.join(messages)}" if name and label(name) else " ".join(messages)
        for name, messages in refusal_fields(refusal_detail(refusal)).items()
    )


# ----------------------------------------------------------------------------- requests


def visible_requests(access: Access) -> QuerySet[QuotaRequest]:
    """The requests the user may see, as the API scopes them (``quotas.queries``)."""
    return visible_quota_requests(quota_request_rows(), access)


# The states of a request the Approvals page lists as decided or withdrawn.
DECIDED_STATES = (
    QuotaRequestState.APPROVED,
    QuotaRequestState.APPLIED,
    QuotaRequestState.REJECTED,
    QuotaRequestState.WITHDRAWN,
)


# The orders the pages list requests in, each the order of their CSV too (the requests API's
# ``ordering``, ``requests_csv_url``): newest filed first (Requests), the longest waiting
# first (Approvals), and the latest step first (Approvals' decided and withdrawn: a withdrawn
# request has no decision; its step is the withdrawal: ``quotas.queries.last_step_at``).
NEWEST_FILED_FIRST = ("-created_at", "-id")
LONGEST_WAITING_FIRST = ("submitted_at", "id")
LATEST_STEP_FIRST = ("-last_step_at", "-id")


def requests_csv_url(ordering: Iterable[str], states: Iterable[str] = ()) -> str:
    """The requests API's CSV of every request the user sees (the API's scope is the pages':
    ``visible_requests``) in ``states`` (none: every state), ordered by ``ordering`` (fields,
    as the page's ``order_by``), as a page's list of them is."""
    query = {"format": "csv", "ordering": ",".join(ordering)}
    return url_with_query(
        "api:quota-request-list", query | ({"state": list(states)} if states else {})
    )


def led_tenants(access: Access) -> list[Tenant]:
    """The tenants the user may ask budget for: those they lead (admins: every tenant)."""
    rows = (
        Tenant.objects.all()
        if access.admin
        else Tenant.objects.filter(pk__in=access.lead_tenant_ids)
    )
    return list(rows.order_by("name"))


def led_queues(access: Access) -> list[Queue]:
    """The team queues the user may ask quota for, as the API offers them (its led tenants';
    admins: every team's)."""
    return list(queues_led_by(access).filter(tenant__isnull=False).order_by("name"))


def unfileable_kinds(
    access: Access, queues: list[Queue], tenants: list[Tenant], form: QuotaRequestForm
) -> dict[str, str]:
    """Why a kind of request cannot be filed by a user who leads a team (admins: any), by
    kind: no queue quota without a team queue to change; no budget without a class that
    costs budget (the form's classes). A kind that may succeed is not named."""
    if not tenants:
        return {}  # leads no team: nothing to file, and the page offers no form
    whose = "" if access.admin else "you lead "
    reasons: dict[str, str] = {}
    if not queues:
        reasons[QuotaRequestKind.QUEUE_QUOTA] = (
            f"No team {whose}has a queue, so there is no queue quota to ask for: a quota "
            "request changes the quota of a team's queue, and an admin creates queues."
        )
    classes = form.fields["priority_class"]
    assert isinstance(classes, ModelChoiceField)
    if classes.queryset is None or not classes.queryset.exists():
        reasons[QuotaRequestKind.BUDGET] = (
            "No priority class has a budget rate above 0, so there is no priority budget to "
            "ask for: work at every class runs without one."
        )
    return reasons


@dashboard_page("requests")
def requests_page(request: HttpRequest, access: Access) -> HttpResponse:
    """A lead's requests, newest first, and the form to file one (GET shows, POST files
    through ``do_create_quota_request``); admins and finance read every team's requests
    (``visible_requests``) and budgets (``budget_tenants``); the form offers only what the
    user may ask for (``led_queues``, ``led_tenants``: finance, as such, nothing, and the page
    says who files instead), and says why where a kind cannot be filed (``unfileable_kinds``:
    a lead whose teams have no queue still asks for budget)."""
    queues = led_queues(access)
    tenants = led_tenants(access)
    every_budget = reads_every_budget(access)
    budget_teams = budget_tenants(access, tenants)
    if request.method == "POST":
        form = QuotaRequestForm(request.POST, queues=queues, tenants=tenants)
        unfileable = unfileable_kinds(access, queues, tenants, form)
        valid = form.is_valid()
        if form.data.get("kind") in unfileable:
            form.add_error("kind", unfileable[form.data["kind"]])
            valid = False
        if valid:
            created = file_request(request, form)
            if created is not None:
                say_where_it_stands(request, created)
                return redirect("dashboard:request", pk=created.pk)
    else:
        initial: dict[str, Any] = {
            "kind": QuotaRequestKind.QUEUE_QUOTA if queues else QuotaRequestKind.BUDGET
        }
        if len(queues) == 1:
            initial["queue"] = queues[0]
        if len(tenants) == 1:
            initial["tenant"] = tenants[0]
        form = QuotaRequestForm(initial=initial, queues=queues, tenants=tenants)
        unfileable = unfileable_kinds(access, queues, tenants, form)
    context = {
        "requests": list(visible_requests(access).order_by(*NEWEST_FILED_FIRST)[:100]),
        "form": form,
        # A kind of request the user may file and could succeed with (a lead whose teams
        # have no queue: budget); ``unfileable``: why the other kinds cannot be filed.
        "can_file": bool(tenants) and len(unfileable) < len(QuotaRequestKind.values),
        "unfileable": unfileable,
        "no_quota_reason": unfileable.get(QuotaRequestKind.QUEUE_QUOTA, ""),
        "no_budget_reason": unfileable.get(QuotaRequestKind.BUDGET, ""),
        "quotas": current_quotas(queues),
        # Leads a team (admins: there is a team), so may file; finance, as such, files nothing
        # and is told who does (``reads_only``).
        "files": bool(tenants),
        "reads_only": not tenants and access.finance,
        "shows_budgets": every_budget or bool(tenants),
        "all_budgets": every_budget,
        "every_team": access.reads_every_request,
        "budgets": current_budgets(budget_teams),
        "budgets_shown": BUDGETS_SHOWN,
        "budgets_url": url_with_query("api:budget-list", budgets_query(budget_teams, every_budget)),
        "budgets_csv_url": url_with_query(
            "api:budget-list", budgets_query(budget_teams, every_budget) | {"format": "csv"}
        ),
        # Every request listed (past the 100 shown), newest first as here.
        "csv_url": requests_csv_url(NEWEST_FILED_FIRST),
    }
    return render(request, "dashboard/requests.html", context, status=form_page_status(request))


# The most budgets the Requests page lists (an admin's: every team's); the budgets API
# (``/api/v1/budgets/?covers=<today>``) has them all.
BUDGETS_SHOWN = 100


@dataclass(frozen=True)
class BudgetNow:
    """A budget of the current period as the Requests page shows it: GPU-hours granted,
    spent, held for running protected windows (reserved up front, settled when they end) and
    remaining (the kept balance: granted less spent and reserved)."""

    budget: PriorityBudget
    spent: Decimal
    reserved: Decimal

    @property
    def remaining(self) -> Decimal:
        return self.budget.balance_gpu_hours


def reads_every_budget(access: Access) -> bool:
    """Whether the budgets API shows the user every team's budgets, by its scope
    (``tenant_scoped``): admins, and finance (``BudgetViewSet.finance_sees_all``: it reads
    the teams' budgets and costs, and changes none)."""
    return access.admin or (access.finance and BudgetViewSet.finance_sees_all)


def budget_tenants(access: Access, led: list[Tenant]) -> list[Tenant]:
    """The teams whose budgets the Requests page lists: every team to those who read every
    team's (``reads_every_budget``), else ``led``, the teams the user leads (theirs to ask
    budget for; the API also shows them the teams they are only a member of)."""
    if reads_every_budget(access):
        return list(Tenant.objects.order_by("name"))
    return led


def budgets_query(tenants: list[Tenant], every_team: bool) -> dict[str, Any]:
    """The budgets API's filters for the budgets the Requests page lists (``current_budgets``
    of ``tenants``, ``budget_tenants``): those whose period covers the pool's today and,
    unless the page lists ``every_team``'s, of each of ``tenants`` (the parameter repeated,
    ``tenant=nlp&tenant=vision``: ``url_with_query``), so the link has the rows the page
    shows and no team the user is only a member of."""
    query: dict[str, Any] = {"covers": f"{timezone.localdate(pool_now()):%Y-%m-%d}"}
    if not every_team:
        query["tenant"] = [tenant.name for tenant in tenants]
    return query


def current_budgets(tenants: Iterable[Tenant]) -> list[BudgetNow]:
    """The budgets of ``tenants`` whose period covers the pool's today (the day the loop picks
    a budget by), by team and class, at most ``BUDGETS_SHOWN`` (one more says there are more),
    with their ledger's spent and reserved sums (``quotas.queries.budget_rows``: one query)."""
    today = timezone.localdate(pool_now())
    rows = budget_rows().filter(covering(today), tenant__in=[tenant.pk for tenant in tenants])
    found: list[Any] = list(
        rows.order_by("tenant__name", "priority_class__name")[: BUDGETS_SHOWN + 1]
    )  # annotated with the ledger's sums (``spent``, ``reserved``: negative or 0)
    return [BudgetNow(budget, spent=-budget.spent, reserved=-budget.reserved) for budget in found]


def current_quotas(queues: Iterable[Queue]) -> list[dict[str, Any]]:
    """The queues' quotas now, to show beside the form: queue, flavor and each level as
    written in the flavor's unit (a MIG flavor's in MIG instances)."""
    found = QueueQuota.objects.filter(queue__in=list(queues)).order_by(
        "queue__name", "flavor__name"
    )
    rows = []
    for queue, flavor, sharing, *levels in found.values_list(
        "queue__name", "flavor__name", "flavor__sharing", *QUEUE_QUOTA_KEYS
    ):
        unit = flavor_unit(sharing)
        written = zip(QUEUE_QUOTA_KEYS, (in_unit(value, unit) for value in levels), strict=True)
        rows.append({"queue": queue, "flavor": flavor, **dict(written)})
    return rows


def file_request(request: HttpRequest, form: QuotaRequestForm) -> QuotaRequest | None:
    """File the form's request through the action, submitted unless saved as a draft;
    None with the refusal on the form."""
    data = form.cleaned_data
    is_quota = data["kind"] == QuotaRequestKind.QUEUE_QUOTA
    tenant = data["queue"].tenant if is_quota else data["tenant"]
    try:
        return do_create_quota_request(
            kind=data["kind"],
            tenant=tenant,
            requested_by=request.user,
            justification=data["justification"],
            payload=form.payload(),
            queue=data["queue"] if is_quota else None,
            flavor=data["flavor"] if is_quota else None,
            priority_class=None if is_quota else data["priority_class"],
            period_start=None if is_quota else data["period_start"],
            period_end=None if is_quota else data["period_end"],
            submit="save_draft" not in request.POST,
        )
    except ValidationError as refusal:
        form.add_refusal(refusal)
    except PermissionDenied as refusal:
        form.add_error(None, str(refusal))
    return None


@dashboard_page("requests")
def request_detail(request: HttpRequest, access: Access, pk: int) -> HttpResponse:
    """One request and where it stands (another tenant's request is not found), with the
    verdict an admin would get on approving it (``approval_verdict``); POST sends a draft to
    the admins (``do_submit_quota_request``), or with ``withdraw`` withdraws it
    (``do_withdraw_quota_request``: a draft is deleted, a submitted request not yet decided
    is kept, withdrawn): its requester only."""
    quota_request = get_object_or_404(visible_requests(access), pk=pk)
    if request.method == "POST" and "withdraw" in request.POST:
        summary = quota_request.summary()
        try:
            withdrawn = do_withdraw_quota_request(quota_request, acting_user=request.user)
        except (ValidationError, PermissionDenied) as refusal:
            messages.error(
                request, f"Request #{quota_request.pk} was not withdrawn: {refusal_text(refusal)}"
            )
            return redirect("dashboard:request", pk=quota_request.pk)
        if withdrawn is None:
            messages.success(request, f"Draft #{pk} is withdrawn: {summary}.")
            return redirect("dashboard:requests")
        messages.success(
            request,
            f"Request #{pk} is withdrawn: {summary}. It stays listed as withdrawn; no admin "
            "will decide it, and you may file a new request for its target.",
        )
        return redirect("dashboard:request", pk=pk)
    if request.method == "POST":
        try:
            submitted = do_submit_quota_request(quota_request, acting_user=request.user)
        except (ValidationError, PermissionDenied) as refusal:
            messages.error(
                request, f"Request #{quota_request.pk} was not submitted: {refusal_text(refusal)}"
            )
        else:
            messages.success(request, f"Request #{submitted.pk} is submitted to the admins.")
            warn_if_not_approvable(request, submitted)
        return redirect("dashboard:request", pk=quota_request.pk)
    context = {
        "request_obj": quota_request,
        "steps": request_steps(quota_request),
        "not_approvable": approval_verdict(quota_request),
        "can_withdraw": quota_request.state == QuotaRequestState.SUBMITTED
        and withdrawal_refusal(quota_request, acting_user=request.user) is None,
        # Mailed when it is decided: its requester and its team's leads (not finance).
        "told_of_decision": quota_request.requested_by_id == request.user.pk
        or quota_request.tenant_id in access.lead_tenant_ids,
    }
    return render(request, "dashboard/request_detail.html", context)


def approval_verdict(quota_request: QuotaRequest) -> str:
    """Why an admin could not approve an open request (a draft or a submitted one) as things
    stand, in the approval's own words (``quotas.actions.approval_refusal``, the rule the
    approval page and the decision actions apply); "" when they could, or once decided."""
    if quota_request.state not in (QuotaRequestState.DRAFT, QuotaRequestState.SUBMITTED):
        return ""
    refusal = approval_refusal(quota_request)
    return "" if refusal is None else " ".join(refusal.messages)


def say_where_it_stands(request: HttpRequest, quota_request: QuotaRequest) -> None:
    """After filing or changing a request: what it is now ("Request #12 is a draft: <its
    summary>.", or submitted), and at once when an admin could not approve it."""
    state = "a draft" if quota_request.state == QuotaRequestState.DRAFT else quota_request.state
    messages.success(request, f"Request #{quota_request.pk} is {state}: {quota_request.summary()}.")
    warn_if_not_approvable(request, quota_request)


def warn_if_not_approvable(request: HttpRequest, quota_request: QuotaRequest) -> None:
    """After filing or changing a request: say at once when an admin could not approve it."""
    verdict = approval_verdict(quota_request)
    if verdict:
        messages.warning(request, f"As things stand an admin could not approve this: {verdict}")


@dashboard_page("requests")
def request_edit(request: HttpRequest, access: Access, pk: int) -> HttpResponse:
    """Change a draft with the request form, prefilled (``do_update_quota_request``: its
    requester only, while it is a draft); ``submit`` in the POST submits it too. Anyone else,
    or a request no longer a draft, is sent back to the request with the action's refusal."""
    quota_request = get_object_or_404(visible_requests(access), pk=pk)
    form = QuotaRequestForm(
        request.POST or None,
        queues=led_queues(access),
        tenants=led_tenants(access),
        draft=quota_request,
    )
    if request.method == "POST" and form.is_valid():
        try:
            changed = do_update_quota_request(
                quota_request, acting_user=request.user, **form.changes()
            )
            if "submit" in request.POST:
                changed = do_submit_quota_request(changed, acting_user=request.user)
        except ValidationError as refusal:
            if "state" not in getattr(refusal, "error_dict", {}):
                form.add_refusal(refusal)
            else:
                messages.error(request, f"Request #{pk} was not changed: {refusal_text(refusal)}")
                return redirect("dashboard:request", pk=pk)
        except PermissionDenied as refusal:
            messages.error(request, f"Request #{pk} was not changed: {refusal}")
            return redirect("dashboard:request", pk=pk)
        else:
            say_where_it_stands(request, changed)
            return redirect("dashboard:request", pk=pk)
    elif request.method != "POST" and quota_request.state != QuotaRequestState.DRAFT:
        # Its state is the reason, its requester or not (as ``do_update_quota_request`` says).
        why = f"Request #{pk} is {quota_request.state}, not a draft, so it can no longer be changed"
        if quota_request.state == QuotaRequestState.SUBMITTED:
            why += (
                ": to change it, withdraw it with Withdraw (it is kept, withdrawn) and file a "
                "new request"
            )
        messages.error(request, f"{why}.")
        return redirect("dashboard:request", pk=pk)
    elif request.method != "POST" and quota_request.requested_by_id != request.user.pk:
        messages.error(request, f"Request #{pk} is not your draft: only its requester changes one.")
        return redirect("dashboard:request", pk=pk)
    context = {"request_obj": quota_request, "form": form}
    return render(request, "dashboard/request_edit.html", context, status=form_page_status(request))


def request_steps(quota_request: QuotaRequest) -> list[dict[str, Any]]:
    """The request's steps so far: drafted (every request starts as a draft:
    ``do_create_quota_request``; it is filed when submitted), submitted, decided, applied, or
    withdrawn by its requester before a decision."""
    steps = [{"what": "drafted", "at": quota_request.created_at, "who": quota_request.requested_by}]
    if quota_request.submitted_at:
        steps.append(
            {
                "what": "submitted",
                "at": quota_request.submitted_at,
                "who": quota_request.requested_by,
            }
        )
    if quota_request.decided_at:
        steps.append(
            {
                "what": "rejected"
                if quota_request.state == QuotaRequestState.REJECTED
                else "approved",
                "at": quota_request.decided_at,
                "who": quota_request.decided_by,
                "note": quota_request.decision_note,
            }
        )
    if quota_request.applied_at:
        steps.append({"what": "applied", "at": quota_request.applied_at, "who": None})
    if quota_request.withdrawn_at:
        steps.append(
            {
                "what": "withdrawn",
                "at": quota_request.withdrawn_at,
                "who": quota_request.requested_by,
            }
        )
    return steps


# ----------------------------------------------------------------------------- approvals


@dashboard_page("approvals")
def approvals(request: HttpRequest, access: Access) -> HttpResponse:
    """Requests waiting for the admin's decision (oldest first); apart, the admin's own
    submitted ones, which another admin decides (``other_deciders``; nobody approves their
    own request); then the latest decided ones and those their requesters withdrew before a
    decision (latest step first)."""
    rows = visible_requests(access)
    submitted = rows.filter(state=QuotaRequestState.SUBMITTED).order_by(*LONGEST_WAITING_FIRST)
    own = list(submitted.filter(requested_by_id=access.user_id))
    context = {
        "pending": list(submitted.exclude(requested_by_id=access.user_id)),
        "own_pending": own,
        "other_deciders": other_deciders(access.user_id) if own else [],
        "decided": list(rows.filter(state__in=DECIDED_STATES).order_by(*LATEST_STEP_FIRST)[:20]),
        # Each list's requests as CSV, in its order: every one waiting (the admin's own
        # included), oldest first; every one decided or withdrawn (past the 20 shown), the
        # latest step first.
        "pending_csv_url": requests_csv_url(LONGEST_WAITING_FIRST, [QuotaRequestState.SUBMITTED]),
        "decided_csv_url": requests_csv_url(LATEST_STEP_FIRST, DECIDED_STATES),
    }
    return render(request, "dashboard/approvals.html", context)


@dashboard_page("approvals")
def approval_detail(request: HttpRequest, access: Access, pk: int) -> HttpResponse:
    """A request with its impact, its what-if replay and the decision form (POST decides
    through the approve-and-apply or reject action). A decision refused, by the form or by
    the action, is the page again answered 400 with the comment typed kept, as the other
    refused forms of the dashboard are."""
    quota_request = get_object_or_404(visible_requests(access), pk=pk)
    form = DecisionForm(request.POST or None)
    if request.method == "POST":
        if form.is_valid() and decide(request, quota_request, form) is not None:
            return redirect("dashboard:approvals")
        return approval_page(request, quota_request, decision_form=form, status=400)
    return approval_page(request, quota_request, decision_form=form)


def approval_page(
    request: HttpRequest,
    quota_request: QuotaRequest,
    *,
    decision_form: DecisionForm | None = None,
    what_if_form: WhatIfForm | None = None,
    status: int = 200,
) -> HttpResponse:
    """A request's approval page: its impact, its what-if and the decision form; a form given
    is shown as it was posted, with its refusal (``what_if_form``: a what-if refused without
    htmx, its days kept and its error beside them)."""
    form = decision_form or DecisionForm()
    impact = request_impact(quota_request).to_json()
    impact["in_unit"] = impact_in_units(impact)
    # Whether the decision actions would take a decision, by their own rule: Approve is
    # offered only when approving would go through (a change that does not fit is refused).
    undecided = decision_refusal(quota_request, acting_user=request.user, approve=False)
    approve_refusal = (
        decision_refusal(quota_request, acting_user=request.user, approve=True)
        if undecided is None
        else None
    )
    context = {
        "request_obj": quota_request,
        "impact": impact,
        # No longer open (``impact.closed_as``): its change was made, or never will be; the
        # page says which, and shows no "after" (an applied budget request's hours are in the
        # grant already).
        "closed": impact["closed_as"] is not None,
        "decision_form": form,
        "what_if_form": what_if_form or WhatIfForm(),
        "what_if_error": form_problems(what_if_form) if what_if_form else "",
        "not_decided_here": "" if undecided is None else why_not_decided(quota_request, undecided),
        "approve_refused": " ".join(approve_refusal.messages)
        if isinstance(approve_refusal, ValidationError)
        else str(approve_refusal or ""),
    } | what_if_context(quota_request, problems=impact["problems"])
    return render(request, "dashboard/approval_detail.html", context, status=status)


def impact_in_units(impact: dict[str, Any]) -> dict[str, Any]:
    """A quota request's impact's amounts as the approval page writes them, each flavor's in
    its unit (``inventory.units``: a MIG flavor's in MIG instances): the levels now and after,
    the pool's figures, and each deserved share with its figures (its ``in_unit``), in one
    query for their flavors; none for a budget request (GPU-hours)."""
    if impact.get("kind") != QuotaRequestKind.QUEUE_QUOTA:
        return {}
    shares = impact.get("deserved_shares") or []
    pool = dict(impact.get("pool") or {})
    flavor = pool.pop("flavor", "")
    units = flavor_units([flavor, *(change["flavor"] for change in shares)])

    def written(amounts: dict[str, Any] | None, unit: str) -> dict[str, str]:
        return {key: in_unit(value, unit) for key, value in (amounts or {}).items()}

    def share(change: dict[str, Any]) -> dict[str, str]:
        unit = units.get(change["flavor"], GPU_UNIT)
        return written({"before": change["before"], "after": change["after"]}, unit) | {
            "change": signed_in_unit(change["change"], unit)
        }

    unit = units.get(flavor, GPU_UNIT)
    return {
        "current": written(impact.get("current"), unit),
        "after": written(impact.get("after"), unit),
        "pool": written(pool, unit),
        "deserved_shares": [change | {"in_unit": share(change)} for change in shares],
    }


def why_not_decided(
    quota_request: QuotaRequest, refusal: ValidationError | PermissionDenied
) -> str:
    """Why the page offers no decision on the request (``decision_refusal``), in its words."""
    fields = getattr(refusal, "error_dict", {})  # the fields a ValidationError names
    if "decided_by" in fields:
        others = other_deciders(quota_request.requested_by_id)
        return "You filed this request, so another admin decides it. " + (
            f"Admins who can: {', '.join(others)}."
            if others
            else "You are the only admin, so nobody can: withdraw it on its request page; an "
            "admin changes a quota or a budget directly in the admin site."
        )
    if quota_request.state == QuotaRequestState.WITHDRAWN:
        return (
            f"{quota_request.requested_by.get_username()} withdrew this request before a "
            "decision; there is nothing to decide."
        )
    if "state" in fields:
        return (
            f"This request is {quota_request.get_state_display()}; "
            "only submitted requests are decided."
        )
    return refusal_text(refusal)


def decide(
    request: HttpRequest, quota_request: QuotaRequest, form: DecisionForm
) -> QuotaRequest | None:
    """Approve (and apply) or reject through the action; None with the refusal on the form."""
    note = form.cleaned_data["decision_note"]
    approve = form.cleaned_data["decision"] == "approve"
    try:
        if approve:
            decided = do_approve_and_apply_quota_request(
                quota_request, acting_user=request.user, note=note
            )
        else:
            decided = do_reject_quota_request(quota_request, acting_user=request.user, note=note)
    except (ValidationError, PermissionDenied) as refusal:
        form.add_refusal(refusal)
        return None
    if approve:
        messages.success(
            request, f"Request #{decided.pk} approved and applied: {decided.summary()}."
        )
    else:
        messages.success(request, f"Request #{decided.pk} rejected: {decided.summary()}.")
    return decided


def what_if_context(
    quota_request: QuotaRequest, *, problems: list[str] | None = None
) -> dict[str, Any]:
    """The latest what-if run of the request, whether it is still running, and its result's
    figure; whether a replay is offered, and if not for a change that would not fit, why
    (``replay_problems``: the impact's ``problems``, given or read by the rule the what-if
    action refuses by, ``quota_request_problems``)."""
    run = quota_request.latest_what_if()
    result = run.result if run is not None and isinstance(run.result, dict) else None
    waits: dict[str, Any] = (result.get("wait_changes") if result else None) or {}
    replayable = quota_request.kind == QuotaRequestKind.QUEUE_QUOTA and quota_request.state in (
        QuotaRequestState.DRAFT,
        QuotaRequestState.SUBMITTED,
    )
    if not replayable:
        problems = []
    elif problems is None:
        problems = quota_request_problems(quota_request)
    window = [
        parse_datetime(result.get(key) or "") if result else None
        for key in ("window_start", "window_end")
    ]
    # The flavors of the deserved shares by team: a MIG flavor's are said in its MIG
    # instances (``partials/what_if_deserved.html``), never as GPUs.
    sides = [
        side.get("deserved_gpus_by_flavor") or {}
        for figures in ((result.get("tenants") if result else None) or {}).values()
        if isinstance(figures, dict)
        for side in (figures.get("before"), figures.get("after"))
        if isinstance(side, dict)
    ]
    names = {name for side in sides for name in side}
    units = flavor_units(names)
    # What the shares count, for the table's caption: GPUs, MIG instances, or both.
    shown_units = {units.get(name, GPU_UNIT) for name in names} or {GPU_UNIT}
    return {
        "deserved_units": " and ".join(f"{unit}s" for unit in UNITS if unit in shown_units),
        "mig_flavors": {name for name, unit in units.items() if unit == MIG_UNIT},
        "window_start": window[0],
        "window_end": window[1],
        "run": run,
        "running": run is not None and run.state in ACTIVE_WHAT_IF_STATES,
        "wait_changes": waits,
        "waits_figure": charts.what_if_waits_figure(waits) if waits else None,
        "waits_unchanged": bool(waits)
        and not any((figures.get("wait_mean_s") or {}).get("change") for figures in waits.values()),
        "can_replay": replayable and not problems,
        "replay_problems": problems,
    }


@dashboard_page("approvals")
def approval_what_if(request: HttpRequest, access: Access, pk: int) -> HttpResponse:
    """The what-if part of a request's page: POST starts a replay (``do_start_what_if``);
    GET is what htmx polls while it runs (its progress bar, then its result)."""
    quota_request = get_object_or_404(visible_requests(access), pk=pk)
    # A form refused shows again as it was filled in (the days typed kept), its error naming
    # the field by its label (``forms.form_problems``): with htmx in its part of the page;
    # without, on the whole approval page, answered 400 (the page is not left for another).
    form = WhatIfForm(request.POST if request.method == "POST" else None)
    if request.method == "POST":
        if form.is_valid():
            try:
                do_start_what_if(
                    quota_request, acting_user=request.user, days=form.cleaned_data["days"]
                )
            except (ValidationError, PermissionDenied) as refusal:
                form.add_refusal(refusal)
        if not getattr(request, "htmx", None):
            if form.errors:
                return approval_page(request, quota_request, what_if_form=form, status=400)
            return redirect("dashboard:approval", pk=quota_request.pk)
    context = {
        "request_obj": quota_request,
        "what_if_form": form,
        "what_if_error": form_problems(form),  # ("" unless refused)
    }
    context |= what_if_context(quota_request)
    return render(request, "dashboard/partials/what_if.html", context)


# ----------------------------------------------------------------------------- audit


def day_start(day: Any) -> datetime:
    """Midnight at the start of ``day`` in the active (the viewer's) zone."""
    return timezone.make_aware(datetime.combine(day, time.min))


@dashboard_page("audit")
def audit(request: HttpRequest, access: Access) -> HttpResponse:
    """The audit log, newest first, filtered by who made the changes (people or the system),
    actor, action, object type and days; in words (``gpupool.audit.words``). A filter's value
    the page does not take is said beside its field and ignored (``audit_filters``)."""
    actions = list(
        AuditEvent.objects.order_by("action").values_list("action", flat=True).distinct()
    )
    object_types = list(
        AuditEvent.objects.order_by("object_type").values_list("object_type", flat=True).distinct()
    )
    form, refused = audit_filters(request.GET, actions, object_types)
    events = AuditEvent.objects.select_related("actor").order_by("-at", "-id")
    api_filters: dict[str, str] = {}
    if form.is_bound and form.is_valid():
        actor = (form.cleaned_data.get("actor") or "").strip()
        if actor and actor.lower() != AUDIT_SYSTEM and not known_actor(actor):
            refused["actor"] = not_understood(actor, AUDIT_EXPECTED["actor"], "changes by anyone")
        # The page keeps the rows the audit API's filters keep, so its CSV holds them too.
        api_filters = audit_api_filters(form.cleaned_data, refused)
        events = AuditEventFilter(api_filters, queryset=events).qs
    elif form.is_bound:
        events = events.none()
    page = Paginator(events, AUDIT_PAGE_SIZE).get_page(request.GET.get("page"))
    shown = list(page.object_list)
    users = audit_usernames(shown)
    units = audited_quota_units(shown)
    rows = [
        {
            "event": event,
            "action": action_label(event.action),
            "kind": object_kind(event.object_type),
            "changes": event_changes(event, users, units),
            "pool_at": pool_moment(event),
        }
        for event in shown
    ]
    for name in refused:
        described = f"{form[name].id_for_label}-not-understood"
        form.fields[name].widget.attrs |= {"aria-invalid": "true", "aria-describedby": described}
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "form": form,
        "fields": [(form[name], refused.get(name, "")) for name in form.fields],
        "filtered": form.is_bound
        and any(name not in refused and form.data.get(name) for name in form.fields),
        "page": page,
        "rows": rows,
        "query": query.urlencode(),
        # Every change the filters keep (past this page), newest first as here.
        "csv_url": url_with_query("api:audit-event-list", api_filters | {"format": "csv"}),
    }
    return render(request, "dashboard/audit.html", context)


def audit_api_filters(data: Mapping[str, Any], refused: Mapping[str, str]) -> dict[str, str]:
    """The audit API's filters that keep the changes the Audit page's filters keep (``data``,
    its form's values; a filter ``refused`` is left out, as the page ignores it). They have
    the page's names; the page's days, in the viewer's zone with Until included, are the
    API's moments: ``since`` the first day's start, ``until`` the start of the day after the
    last (excluded)."""
    kept = {name: value for name, value in data.items() if value and name not in refused}
    api_filters: dict[str, str] = {
        name: str(kept[name]).strip()
        for name in ("made_by", "actor", "action", "object_type")
        if name in kept
    }
    if "since" in kept:
        api_filters["since"] = day_start(kept["since"]).isoformat()
    if "until" in kept:
        api_filters["until"] = (day_start(kept["until"]) + timedelta(days=1)).isoformat()
    return api_filters


# What each audit filter takes, for a value it does not (``not_understood``), and what the
# page shows instead.
AUDIT_EXPECTED = {
    "made_by": "pick people or the system",
    "actor": "the username of someone who made a change, or system",
    "action": "pick an action from the list",
    "object_type": "pick an object type from the list",
    "since": "a day is written YYYY-MM-DD (2026-03-01)",
    "until": "a day is written YYYY-MM-DD (2026-03-01)",
}
AUDIT_INSTEAD = {
    "made_by": "changes made by anyone",
    "action": "every action",
    "object_type": "every object type",
    "since": "changes from the first one on",
    "until": "changes up to the latest",
}


def audit_filters(
    query: Any, actions: list[str], object_types: list[str]
) -> tuple[AuditFilterForm, dict[str, str]]:
    """The audit page's filter form, its options in words (their values the names stored, so
    links keep working), and what it did not understand by field: a value that is no choice
    or no day is said (``not_understood``) and left out; the other filters still apply."""
    refused: dict[str, str] = {}

    def make(data: Any) -> AuditFilterForm:
        form = AuditFilterForm(data or None, actions=actions, object_types=object_types)
        action_field = form.fields["action"]
        type_field = form.fields["object_type"]
        assert isinstance(action_field, ChoiceField) and isinstance(type_field, ChoiceField)
        by_action = sorted((action_label(name), name) for name in actions)
        by_type = sorted((object_kind(name), name) for name in object_types)
        action_field.choices = [("", "any"), *((name, label) for label, name in by_action)]
        type_field.choices = [("", "any"), *((name, kind) for kind, name in by_type)]
        return form

    form = make(query)
    if not form.is_bound or form.is_valid():
        return form, refused
    kept = query.copy()
    for name, errors in form.errors.as_data().items():
        if name in AUDIT_INSTEAD and {e.code for e in errors} & {"invalid", "invalid_choice"}:
            refused[name] = not_understood(
                query.get(name, ""), AUDIT_EXPECTED[name], AUDIT_INSTEAD[name]
            )
            kept.pop(name, None)
    return (make(kept), refused) if refused else (form, refused)


def known_actor(name: str) -> bool:
    """Whether ``name`` made a change in the log, or is a user's (who may have made none)."""
    return (
        AuditEvent.objects.filter(actor_name=name).exists()
        or get_user_model().objects.filter(username=name).exists()
    )


def audit_usernames(events: Iterable[AuditEvent]) -> dict[int, str]:
    """The usernames of the users the events' recorded fields name (``decided_by_id``), in
    one query for the page."""
    ids = {
        value
        for event in events
        for snapshot in (event.before, event.after)
        if isinstance(snapshot, dict)
        for key, value in snapshot.items()
        if isinstance(value, int)
        and not isinstance(value, bool)
        and names_a_user(event.object_type, key)
    }
    if not ids:
        return {}
    users = get_user_model().objects.filter(pk__in=ids)
    return {int(pk): str(name) for pk, name in users.values_list("pk", "username")}


# What an audited queue quota is (its snapshot keeps its flavor's id: ``flavor_id``).
AUDITED_QUOTA = QueueQuota._meta.label_lower


def audited_quota_units(events: Iterable[AuditEvent]) -> dict[int, str]:
    """The unit of the flavor of each queue quota the events audit, by the flavor's id, in
    one query for the page (``inventory.units``: a MIG flavor's levels are MIG instances)."""
    ids = {
        snapshot.get("flavor_id")
        for event in events
        if event.object_type == AUDITED_QUOTA
        for snapshot in (event.before, event.after)
        if isinstance(snapshot, dict)
    }
    return flavor_units_by_id(pk for pk in ids if isinstance(pk, int))


def pool_moment(event: AuditEvent) -> datetime | None:
    """When the control loop's row says it acted, on the pool's clock (``after["at"]``:
    registrations, idle alerts), for the page to show in the viewer's zone; None if none."""
    written = event.after.get("at") if isinstance(event.after, dict) else None
    return aware_moment(written) if isinstance(written, str) else None


def aware_moment(text: str) -> datetime | None:
    """A recorded moment written in ISO 8601 with its zone; None for text that is none (no
    moment, a well-formed one that is no real moment, or one without a zone)."""
    try:
        moment = parse_datetime(text)
    except ValueError:  # well formed, but no real moment
        return None
    return moment if moment is not None and timezone.is_aware(moment) else None


def event_changes(
    event: AuditEvent, users: dict[int, str], units: dict[int, str] | None = None
) -> list[dict[str, Any]]:
    """The fields an audit event changed, each by its label in words and its value before and
    after as the page shows it (``audit_value``: a queue quota's levels in its flavor's unit,
    ``units`` by flavor id, ``audited_quota_units``); a field whose two values read the same
    (``499.42 GPU-h`` written at two scales) is no change and left out."""
    before = event.before or {}
    after = event.after or {}
    unit = GPU_UNIT
    if event.object_type == AUDITED_QUOTA:
        flavor_id = after.get("flavor_id", before.get("flavor_id"))
        unit = (units or {}).get(flavor_id, GPU_UNIT) if isinstance(flavor_id, int) else GPU_UNIT
    changes = []
    for name in event.changed_fields():
        old = audit_value(event.object_type, name, before.get(name), users, unit)
        new = audit_value(event.object_type, name, after.get(name), users, unit)
        if old != new:
            label = field_label(event.object_type, name)
            changes.append({"field": label, "name": name, "before": old, "after": new})
    return changes


def audit_value(
    object_type: str, name: str, value: Any, users: dict[int, str], unit: str = GPU_UNIT
) -> dict[str, Any]:
    """A recorded value as the page shows it: ``moment`` for a date and time (shown in the
    viewer's zone by ``local_time``), else ``text``: a user's id as their username, yes/no,
    GPUs and GPU-hours in the pages' format (``field_value``: a budget's ``gpu_hours``, kept
    with 3 places, and its ``remaining_gpu_hours``, with 4, read alike; an amount of GPUs in
    ``unit``, a MIG flavor's quota's in MIG instances), lists joined; an empty value as none
    (the page's dash)."""
    if isinstance(value, str) and len(value) >= 16 and value[:4].isdigit():
        moment = aware_moment(value)
        if moment is not None:
            return {"text": None, "moment": moment}
    text: Any
    if value == "" or value == [] or value == {}:
        text = None  # nothing: the page's dash, as for no value
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, int) and names_a_user(object_type, name):
        text = users.get(value, f"user #{value} (deleted)")
    elif isinstance(value, list):
        text = ", ".join(str(item) for item in value)
    elif isinstance(value, dict):
        text = ", ".join(f"{key}: {item}" for key, item in value.items())
    elif unit != GPU_UNIT and name in GPU_FIELDS and isinstance(value, int | float | str):
        text = in_unit(value, unit)
    else:
        text = field_value(name, value)
    return {"text": text, "moment": None}
