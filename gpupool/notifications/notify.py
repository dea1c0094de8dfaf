"""Mails to the people gpupool acts for, through Django's mail framework.

``notify(kind, recipients, subject=..., body=...)`` sends one mail per recipient who has an
address and has not turned ``kind`` off, after the current transaction commits: a change that
rolls back tells nobody, and a mail that fails is logged and never undoes the change or fails
the caller. The quota actions call ``notify_quota_request`` at each step of a request; the
control loop calls ``notify_workload_event`` when a workload starts, is preempted or fails, and
``notify_idle_workload`` once per idle spell past its idle alert timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage, get_connection
from django.db import transaction
from django.db.models import Q
from django.urls import reverse

from gpupool.notifications.choices import WORKLOAD_EVENT_KIND, NotificationKind, WorkloadEvent
from gpupool.notifications.models import NotificationPreference
from gpupool.tenancy.choices import MembershipRole, SiteRoleName

if TYPE_CHECKING:
    from gpupool.quotas.models import QuotaRequest
    from gpupool.workloads.models import Workload

logger = logging.getLogger(__name__)

SUBJECT_PREFIX = "[gpupool] "


def notify(kind: str, user_ids: Iterable[int], *, subject: str, body: str) -> None:
    """Mail each of the users who has an address and has not opted out of ``kind``, once the
    current transaction commits (at once outside one); never raises."""
    user_ids = sorted(set(user_ids))
    if not user_ids:
        return
    transaction.on_commit(lambda: _send(kind, user_ids, subject, body), robust=True)


def _send(kind: str, user_ids: Iterable[int], subject: str, body: str) -> None:
    """Send the mails now; failures are logged, never raised."""
    try:
        opted_out = set(
            NotificationPreference.objects.filter(
                user_id__in=user_ids, kind=kind, enabled=False
            ).values_list("user_id", flat=True)
        )
        addresses = [
            email
            for pk, email in get_user_model()
            .objects.filter(pk__in=user_ids, is_active=True)
            .order_by("pk")
            .values_list("pk", "email")
            if email and pk not in opted_out
        ]
        if not addresses:
            return
        messages = [
            EmailMessage(SUBJECT_PREFIX + subject, body, settings.DEFAULT_FROM_EMAIL, [address])
            for address in addresses
        ]
        get_connection().send_messages(messages)
    except Exception:
        logger.exception("could not send the %s mail %r to users %s", kind, subject, user_ids)


def link(path: str) -> str:
    """An absolute link to ``path`` (a dashboard page) when ``GPUPOOL_BASE_URL`` is set, else
    the path."""
    return settings.GPUPOOL_BASE_URL.rstrip("/") + path


# ----------------------------------------------------------------------------- quota requests


def site_admins() -> set[int]:
    """The ids of every active superuser and holder of the site admin role."""
    return set(
        get_user_model()
        .objects.filter(
            Q(is_superuser=True) | Q(site_roles__role=SiteRoleName.ADMIN), is_active=True
        )
        .values_list("pk", flat=True)
    )


def request_deciders(request: QuotaRequest) -> set[int]:
    """The ids of the admins who can decide ``request``: every active admin but its requester,
    since nobody decides their own request (as ``quotas.queries.other_deciders`` names them
    on the Approvals page)."""
    return site_admins() - {request.requested_by_id}


def _nobody_decides(request: QuotaRequest) -> tuple[str, list[str]]:
    """The mail that tells the requester nobody can decide their request: they are the only
    admin (nobody decides their own request), or the pool has no admin at all."""
    number = f"#{request.pk}"
    if request.requested_by_id in site_admins():
        why = (
            "You are the only admin, and nobody decides their own request, so nobody can "
            "decide it. Withdraw it on its page; an admin changes a quota or a budget "
            "directly in the admin site, without a request."
        )
    else:
        why = "The pool has no admin, so nobody can decide it until someone is made one."
    lines = [
        f"Request {number} of {request.tenant} ({request.summary()}) is submitted.",
        why,
        "",
        f"The request: {link(reverse('dashboard:request', args=[request.pk]))}",
    ]
    return f"request {number} waits for a decision nobody can make", lines


def request_parties(request: QuotaRequest) -> set[int]:
    """The ids of the requester and of the leads of the request's tenant."""
    leads = get_user_model().objects.filter(
        memberships__tenant=request.tenant_id, memberships__role=MembershipRole.LEAD
    )
    return {request.requested_by_id, *leads.values_list("pk", flat=True)}


def notify_quota_request(request: QuotaRequest, step: str, *, acting_user: Any) -> None:
    """Tell the parties of ``request`` about ``step`` (``submitted``: the admins who can decide
    it, never its requester, or, where nobody can, the requester once; ``approved``,
    ``rejected``, ``applied``, ``approved-and-applied``: the requester and the tenant's leads),
    but not the person who took the step."""
    number = f"#{request.pk}"
    actor = getattr(acting_user, "pk", None)
    if step == "submitted":
        kind = NotificationKind.REQUEST_SUBMITTED
        recipients = request_deciders(request)
        subject = f"request {number} from {request.tenant} waits for a decision"
        lines = [
            f"{request.requested_by} asks for {request.summary()}.",
            f"Why: {request.justification}",
            "",
            "Its impact, and approve or reject it: "
            + link(reverse("dashboard:approval", args=[request.pk])),
        ]
        if not recipients:  # submitted once: said once, to the one who submitted it
            subject, lines = _nobody_decides(request)
            actor, recipients = None, {request.requested_by_id}
    else:
        kind = (
            NotificationKind.REQUEST_APPLIED
            if step == "applied"
            else NotificationKind.REQUEST_DECIDED
        )
        recipients = request_parties(request)
        verb = step.replace("-", " ")
        subject = f"request {number} {verb}: {request.summary()}"
        lines = [f"Request {number} of {request.tenant} ({request.summary()}) is {verb}."]
        if step != "applied" and request.decided_by is not None:
            lines.append(f"Decided by {request.decided_by}: {request.decision_note or '-'}")
        if step in ("applied", "approved-and-applied"):
            lines.append("The change is in force now.")
        lines += ["", f"The request: {link(reverse('dashboard:request', args=[request.pk]))}"]
    notify(
        kind,
        recipients - {actor},
        subject=subject,
        body="\n".join(lines) + "\n",
    )


# ----------------------------------------------------------------------------- workloads


def notify_workload_event(
    workload: Workload,
    event: str,
    *,
    at: datetime,
    details: Mapping[str, object] | None = None,
) -> None:
    """Tell a workload's submitter that it ``started``, was ``preempted`` or ``failed`` (unless
    they opted out); ``details`` are shown as ``name: value`` lines. Never raises for a mail;
    an unknown event is a caller's bug (``ValueError``)."""
    if event not in WorkloadEvent.values:
        raise ValueError(f"unknown workload event {event!r}; one of {WorkloadEvent.values}")
    if workload.submitter_id is None:
        return
    name = f"{workload.namespace}/{workload.name}"
    lines = [f"Workload {name} {event} at {at.isoformat(timespec='seconds')}."]
    lines += [f"{key}: {value}" for key, value in (details or {}).items()]
    page = reverse("dashboard:workload", args=[workload.namespace, workload.name])
    lines += ["", f"The workload: {link(page)}"]
    notify(
        WORKLOAD_EVENT_KIND[WorkloadEvent(event)],
        [workload.submitter_id],
        subject=f"{name} {event}",
        body="\n".join(lines) + "\n",
    )


def tenant_leads(tenant_id: int | None) -> set[int]:
    """The ids of the leads of a tenant (none for no tenant)."""
    if tenant_id is None:
        return set()
    return set(
        get_user_model()
        .objects.filter(memberships__tenant=tenant_id, memberships__role=MembershipRole.LEAD)
        .values_list("pk", flat=True)
    )


def notify_idle_workload(
    workload: Workload, *, idle_since: datetime, reclaim_at: datetime | None
) -> None:
    """Tell a workload's submitter and its team's leads that its GPUs sit idle (unless they
    opted out of ``workload-idle``), and when it is reclaimed if it stays idle."""
    name = f"{workload.namespace}/{workload.name}"
    since = idle_since.isoformat(timespec="seconds")
    lines = [f"The GPUs of workload {name} have done no work since {since}."]
    if reclaim_at is not None:
        lines.append(
            f"If they stay idle it is reclaimed at {reclaim_at.isoformat(timespec='seconds')}:"
            " it ends and is not requeued."
        )
    else:
        lines.append("Its idle policy does not reclaim it; others may be waiting for GPUs.")
    page = reverse("dashboard:workload", args=[workload.namespace, workload.name])
    lines += ["", f"The workload: {link(page)}"]
    recipients = tenant_leads(workload.queue.tenant_id)
    if workload.submitter_id is not None:
        recipients.add(workload.submitter_id)
    notify(
        NotificationKind.WORKLOAD_IDLE,
        recipients,
        subject=f"{name} is idle since {since}",
        body="\n".join(lines) + "\n",
    )
