"""The small pool two teams share, for the page tests and the governance tests.

Root queue ``pool`` over queue ``nlp`` (tenant nlp, namespace ``nlp``; guarantee 4, deserved 8,
capability 16 h100 GPUs) and queue ``vision`` (tenant vision, namespace ``vision``; 4 / 8 /
16); classes ``normal`` (default, free) and ``high`` (value 100, budget rate 1). The h100 nodes
and the people are the caller's; ``lena`` leads nlp, ``max`` is a member of it, ``vera``
leads vision, ``fin`` holds the finance role, and whoever else the caller names is only made.
Every person has the address ``<name>@example.org``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from django.test import TestCase
from domain_builders import (
    MIG_FLAVOR,
    explained,
    flavor,
    node,
    priority_class,
    queue,
    quota,
    tenant,
    this_month,
    user,
)

from gpupool.inventory.models import Flavor
from gpupool.quotas.actions import do_create_quota_request, do_grant_budget
from gpupool.quotas.models import PriorityClass, Queue, QuotaRequest
from gpupool.scheduler.explain import MIG_UNIT, Verdict, explanation
from gpupool.tenancy.actions import do_grant_site_role
from gpupool.tenancy.models import Tenant
from gpupool.workloads.actions import PodSetSpec, do_submit_workload


@dataclass
class Pool:
    """The two teams' pool, queues, classes and users."""

    h100: Any
    nlp: Tenant
    vision: Tenant
    root: Queue
    nlp_queue: Queue
    vision_queue: Queue
    normal: PriorityClass
    high: PriorityClass
    users: dict[str, Any]


def person(name: str, *, admin: bool = False, password: str | None = None) -> Any:
    """A user with the address ``<name>@example.org`` (and a password, when given)."""
    made = user(name, admin=admin)
    made.email = f"{name}@example.org"
    if password is not None:
        made.set_password(password)
    made.save()
    return made


def two_teams(
    nodes: Callable[[Flavor], None],
    people: Iterable[str],
    *,
    admins: Iterable[str] = (),
    vision_members: Iterable[str] = (),
    passwords: Callable[[str], str | None] = lambda name: None,
) -> Pool:
    """The pool of the module's doc: ``nodes`` makes the h100 nodes; ``people`` (which must
    hold lena, max, vera and fin) and ``admins`` are made, the admins with the admin role."""
    h100 = flavor("h100")
    nodes(h100)
    admin_names = set(admins)
    users = {
        name: person(name, admin=name in admin_names, password=passwords(name))
        for name in (*people, *admin_names)
    }
    do_grant_site_role(users["fin"], role="finance", acting_user=None)
    nlp = tenant("nlp", lead=users["lena"], members=(users["max"],), namespaces=("nlp",))
    vision = tenant(
        "vision",
        lead=users["vera"],
        members=tuple(users[name] for name in vision_members),
        namespaces=("vision",),
    )
    root = queue("pool")
    nlp_queue = queue("nlp", parent=root, tenant=nlp)
    vision_queue = queue("vision", parent=root, tenant=vision)
    quota(nlp_queue, h100, 4, 8, 16)
    quota(vision_queue, h100, 4, 8, 16)
    return Pool(
        h100=h100,
        nlp=nlp,
        vision=vision,
        root=root,
        nlp_queue=nlp_queue,
        vision_queue=vision_queue,
        normal=priority_class("normal", default=True),
        high=priority_class("high", value=100, budget_rate=Decimal(1)),
        users=users,
    )


def submit(pool: Pool, name: str, queue: Queue, by: str) -> Any:
    """A pending workload of one 8-GPU h100 pod, submitted to ``queue`` by the user ``by``."""
    return do_submit_workload(
        name,
        queue=queue,
        pod_sets=[PodSetSpec(count=1, gpus=8, flavor=pool.h100)],
        submitter=pool.users[by],
    )


# What ``quota_request`` asks for unless told: a team's h100 quota of 4 / 8 / 16 raised.
ASKED_LEVELS = {"guarantee": 6, "deserved": 10, "capability": 16}


def quota_request(
    pool: Pool,
    *,
    by: str = "lena",
    team: str = "nlp",
    queue: Queue | None = None,
    flavor: Flavor | None = None,
    justification: str = "more guaranteed GPUs",
    submit: bool = False,
    **levels: Any,
) -> QuotaRequest:
    """``by``'s request (lena's unless told) for the quota of ``team``'s queue (``queue``, when
    given) of ``flavor`` (h100 unless told) at ``ASKED_LEVELS``, ``levels`` changing some: a
    draft unless ``submit``, filed through the action as the pages and the API file one."""
    return do_create_quota_request(
        kind="queue-quota",
        tenant=getattr(pool, team),
        requested_by=pool.users[by],
        justification=justification,
        payload=ASKED_LEVELS | levels,
        queue=queue or getattr(pool, f"{team}_queue"),
        flavor=flavor or pool.h100,
        submit=submit,
    )


def budget_request(
    pool: Pool,
    gpu_hours: Any,
    *,
    by: str = "lena",
    period: tuple[date, date] | None = None,
    granted: Any = None,
    justification: str = "a deadline",
    submit: bool = False,
) -> QuotaRequest:
    """``by``'s request (lena's unless told) adding ``gpu_hours`` to nlp's budget at class
    high for ``period`` (this month unless told: ``domain_builders.this_month``), which is
    first granted ``granted`` GPU-hours when told: a draft unless ``submit``, filed through
    the action."""
    start, end = period or this_month()
    if granted is not None:
        do_grant_budget(
            pool.nlp,
            pool.high,
            period_start=start,
            period_end=end,
            gpu_hours=granted,
            acting_user=None,
        )
    return do_create_quota_request(
        kind="budget",
        tenant=pool.nlp,
        requested_by=pool.users[by],
        justification=justification,
        payload={"gpu_hours": gpu_hours},
        priority_class=pool.high,
        period_start=start,
        period_end=end,
        submit=submit,
    )


class CommitsEachRequest:
    """A test client mixin: each request ends as a committed one would, so the work it left
    for the commit (mails, the what-if's dispatch) runs when it returns (the test's own
    transaction never commits)."""

    def request(self, *args: Any, **kwargs: Any) -> Any:
        """Make the request, then run what it left for the commit."""
        with TestCase.captureOnCommitCallbacks(execute=True):
            return super().request(*args, **kwargs)  # type: ignore[misc]


# Facts of nlp's waiting work that name workloads of both teams (the privacy tests of the
# API, the CLI and the queries): capacity held for vision's starving workload, and victims
# of both teams leaving; how the pages, the API and the CLI name a workload of a team the
# reader is not in.
STARVING_FOR_VISION = {
    "queue": "nlp",
    "flavor": "h100",
    "held_for": "vision/big",
    "held_because": "starving",
    "starving_since": 1_765_000_000,
}
LEAVING_FROM_BOTH = {
    "victims": ["nlp/sweep", "vision/seg"],
    "victim_queues": {"nlp": 1, "vision": 1},
}
ANOTHER_TEAMS_WORKLOAD = "another team's workload"


def nlp_and_vision() -> Pool:
    """Teams nlp (lead lena, member max) and vision (lead vera), admin ada; one 8-GPU node."""
    return two_teams(
        lambda h100: node("n1", h100, gpus=8), ("fin", "lena", "max", "vera"), admins=("ada",)
    )


# Facts of nlp's MIG work waiting behind others of the pool for its quota room, with a share
# nlp lent that cannot be taken back (``mig_behind``): the core's "behind" sentence says the
# position, so every reader says it again with the current one (``workloads.queries.sentence``)
# -- and must say it in MIG instances, as the core did (``MIG_BEHIND_SAYS``), not in GPUs.
MIG_BEHIND = {
    "queue": "nlp",
    "resource": "quota",
    "flavor": MIG_FLAVOR,
    "free": 2,
    "asked": 4,
    "lent_gpus": 3,
    "lent_flavor": MIG_FLAVOR,
    "cannot_reclaim": "never",
}
MIG_BEHIND_SAYS = (
    f"2 {MIG_FLAVOR} MIG instances of quota left, 4 asked",
    "Its queue lent 3 MIG instances of its share",
)


def mig_behind(pool: Pool, name: str, rank: float = 1.0) -> Any:
    """nlp's pending workload ``name`` (by max): one pod of 4 MIG instances of ``pool.mig``
    (``domain_builders.mig_beside`` first), waiting behind others (``MIG_BEHIND``) as the
    core says it, in the MIG flavor's unit; ranked ``rank`` in its queue."""
    workload = do_submit_workload(
        name,
        queue=pool.nlp_queue,
        pod_sets=[PodSetSpec(count=1, gpus=4, flavor=pool.mig)],  # type: ignore[attr-defined]
        submitter=pool.users["max"],
    )
    said = explanation("", Verdict("behind", MIG_BEHIND), 1, {MIG_FLAVOR: MIG_UNIT}).detail
    explained(workload, "behind", said, MIG_BEHIND, queue_rank=rank)
    return workload
