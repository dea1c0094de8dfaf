"""The idle policy on the simulated cluster: an idle notebook is alerted about once, then
reclaimed (reason ``idle``) and ends; a busy one is not; one in its protected window is not.

The utilisation comes from the simulated source (profiles chosen per workload), read by the
loop's own sampler every minute, exactly as on a real pool.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core import mail
from domain_builders import priority_class, user
from loop_world import LoopWorld

from gpupool.accounting.models import PreemptionEvent
from gpupool.audit.models import AuditEvent
from gpupool.notifications.actions import do_set_notification_preference
from gpupool.quotas.actions import do_save_queue
from gpupool.tenancy.actions import do_set_membership
from gpupool.utilization.activity import idle_spell_start
from gpupool.utilization.simulated import Profile, SimulatedSource
from gpupool.workloads.choices import WorkloadState
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

ALERT_S = 20 * 60
RECLAIM_S = 60 * 60


class IdleWorld(LoopWorld):
    """LoopWorld with an interactive class that alerts after 20 minutes idle and reclaims
    after an hour, a submitter and a lead with addresses, and profiles chosen per notebook."""

    def __init__(self, profiles: dict[str, Profile]) -> None:
        super().__init__()
        self.interactive = priority_class(
            "interactive", 100, idle_alert_after_s=ALERT_S, idle_reclaim_after_s=RECLAIM_S
        )
        self.owner = user("ada")
        self.owner.email = "ada@example.org"
        self.owner.save()
        self.lead = user("grace")
        self.lead.email = "grace@example.org"
        self.lead.save()
        tenant = self.queue.tenant
        do_set_membership(self.owner, tenant, role="member", acting_user=None)
        do_set_membership(self.lead, tenant, role="lead", acting_user=None)
        self.loop.utilization.source = SimulatedSource(
            self.cluster, chosen={f"team-a/{name}": p for name, p in profiles.items()}
        )

    def notebook(self, name: str, **fields: Any) -> Workload:
        """A one-GPU notebook at the interactive class, submitted by ada."""
        return self.submit(
            name, gpus=1, priority_class=self.interactive, submitter=self.owner, **fields
        )

    def run(self, minutes: int, capture: Any) -> None:
        """A cycle every five minutes for ``minutes`` minutes (each reads the source for the
        five minutes since the last), mails sent as they commit."""
        for _ in range(minutes // 5):
            self.clock.advance(300)
            with capture(execute=True):
                self.cycle()


def started(world: IdleWorld, *names: str) -> None:
    for _ in range(3):  # pods made, bound, seen running
        world.cycle()
    for name in names:
        assert world.workload(name).state == WorkloadState.RUNNING


def idle_mails() -> list[Any]:
    return [m for m in mail.outbox if " is idle since " in m.subject]


def test_an_idle_notebook_is_alerted_once_then_reclaimed_and_ends(
    django_capture_on_commit_callbacks: Any,
) -> None:
    world = IdleWorld({"idle-nb": Profile.IDLE_RESERVATION})
    world.notebook("idle-nb")
    started(world, "idle-nb")
    began = world.workload("idle-nb").started_at

    world.run(15, django_capture_on_commit_callbacks)
    assert idle_mails() == []  # not idle long enough yet
    world.run(10, django_capture_on_commit_callbacks)
    notebook = world.workload("idle-nb")
    assert notebook.idle_since == began  # never active: idle since its start
    assert notebook.idle_alerted_since == notebook.idle_since
    [sent_owner, sent_lead] = sorted(idle_mails(), key=lambda m: m.to)
    assert (sent_owner.to, sent_lead.to) == (["ada@example.org"], ["grace@example.org"])
    assert "reclaimed at" in sent_owner.body
    [pod] = [p for p in world.cluster.pods() if p.name.startswith("idle-nb")]
    events = world.cluster.events_of(pod.ref)
    assert [(e["reason"], e["type"]) for e in events if e["reason"] == "Idle"] == [
        ("Idle", "Warning")
    ]
    assert AuditEvent.objects.filter(action="control.idle_alerts").count() == 1

    world.run(10, django_capture_on_commit_callbacks)
    assert len(idle_mails()) == 2  # once per idle spell, not once a cycle

    world.run(30, django_capture_on_commit_callbacks)
    [event] = PreemptionEvent.objects.filter(victim__name="idle-nb")
    assert event.reason == "idle" and event.preemptor is None
    assert event.gpus_freed == 1 and event.lost_gpu_hours >= 1
    world.run(10, django_capture_on_commit_callbacks)
    notebook = world.workload("idle-nb")
    assert notebook.state == WorkloadState.PREEMPTED  # it ends: not requeued
    assert list(notebook.transitions.values_list("to_state", flat=True))[-1] == "preempted"
    world.run(5, django_capture_on_commit_callbacks)
    assert world.workload("idle-nb").state == WorkloadState.PREEMPTED
    assert PreemptionEvent.objects.filter(victim__name="idle-nb").count() == 1
    # Ended where it was reclaimed: finished then (it read unfinished for ever, holding its
    # namespace, queue and flavor).
    ended = world.workload("idle-nb")
    assert ended.finished_at == ended.transitions.order_by("-id")[0].at


def test_a_busy_notebook_is_neither_alerted_nor_reclaimed(
    django_capture_on_commit_callbacks: Any,
) -> None:
    world = IdleWorld({"busy-nb": Profile.BUSY_TRAINING})
    world.notebook("busy-nb")
    started(world, "busy-nb")
    world.run(RECLAIM_S // 60 + 10, django_capture_on_commit_callbacks)
    notebook = world.workload("busy-nb")
    assert notebook.state == WorkloadState.RUNNING and notebook.idle_since is None
    assert idle_mails() == []
    assert not PreemptionEvent.objects.exists()


def test_an_idle_notebook_in_its_protected_window_is_alerted_but_not_reclaimed(
    django_capture_on_commit_callbacks: Any,
) -> None:
    world = IdleWorld({"kept-nb": Profile.IDLE_RESERVATION})
    world.notebook("kept-nb", protected_runtime_s=2 * RECLAIM_S)
    started(world, "kept-nb")
    world.run(RECLAIM_S // 60 + 10, django_capture_on_commit_callbacks)
    assert world.workload("kept-nb").state == WorkloadState.RUNNING
    assert not PreemptionEvent.objects.exists()
    assert len(idle_mails()) == 2
    world.run(RECLAIM_S // 60, django_capture_on_commit_callbacks)  # the window is over
    assert PreemptionEvent.objects.get(victim__name="kept-nb").reason == "idle"


def test_a_queue_override_and_an_opt_out_are_respected(
    django_capture_on_commit_callbacks: Any,
) -> None:
    world = IdleWorld({"nb": Profile.IDLE_RESERVATION})
    world.queue.idle_reclaim_after_s = 3 * RECLAIM_S
    do_save_queue(world.queue, acting_user=None)
    do_set_notification_preference(
        world.owner, "workload-idle", enabled=False, acting_user=world.owner
    )
    world.notebook("nb")
    started(world, "nb")
    world.run(RECLAIM_S // 60 + 10, django_capture_on_commit_callbacks)
    assert world.workload("nb").state == WorkloadState.RUNNING  # the queue waits 3 h
    assert [m.to for m in idle_mails()] == [["grace@example.org"]]  # ada opted out


@pytest.mark.parametrize(
    ("case", "previous", "last_active", "want"),
    [
        ("active in the window's last step: not idle", 500.0, 200.0, None),
        ("active earlier in the window: idle since then", None, 150.0, 150.0),
        ("no activity, idle before: the same spell", 90.0, None, 90.0),
        ("no activity, busy before: idle since the window began", None, None, 100.0),
        ("a spell of an earlier run does not count", 10.0, None, 100.0),
        ("a gap at the window's end (a failed scrape) is no idleness", 90.0, 180.0, None),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_the_idle_spell_after_a_window(
    case: str, previous: float | None, last_active: float | None, want: float | None
) -> None:
    got = idle_spell_start(
        previous=previous,
        window_start=100.0,
        last_seen_at=180.0 if last_active == 180.0 else 200.0,
        last_active_at=last_active,
        started_at=50.0,
    )
    assert got == want, case
