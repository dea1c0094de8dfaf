"""One cycle, step by step, on a fake cluster: sync -> snapshot -> plan -> record -> apply."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.db.models.expressions import RawSQL
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from domain_builders import flavor
from loop_builders import World, build_world

from gpupool.accounting.models import UsageInterval
from gpupool.audit.models import AuditEvent
from gpupool.clusters.grouping import WorkloadKey
from gpupool.control import loop as loop_module
from gpupool.control.actions import do_record_cluster_sync
from gpupool.control.models import SchedulingCycle
from gpupool.control.snapshot import read_workloads
from gpupool.control.state import LoopState
from gpupool.control.sync import PodSetShape, Registration, SyncDecision, moment
from gpupool.inventory.models import Node
from gpupool.quotas.actions import do_save_priority_class
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.tenancy.actions import do_save_tenant
from gpupool.workloads.models import Workload, WorkloadTransition

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db: None) -> World:
    """Two teams, two 8-GPU nodes, a loop."""
    return build_world()


def test_new_nodes_appear_in_the_inventory_with_their_flavor(world: World) -> None:
    world.cycle()
    nodes = {n.name: n for n in Node.objects.select_related("flavor")}
    assert set(nodes) == {"n1", "n2"}
    assert {n.flavor.name for n in nodes.values()} == {"h100"}
    assert nodes["n1"].gpus.count() == 8


def test_a_submitted_workload_gets_its_pods_then_is_bound_and_runs(world: World) -> None:
    world.submit("train", gpus=4, count=2)
    world.cycle()  # creates the pods
    assert [p.name for p in world.cluster.pods_of("train")] == ["train-main-0", "train-main-1"]
    world.cycle()  # admits and binds them
    train = world.workload("train")
    assert train.state == "admitted"
    assert all(p.node_name for p in world.cluster.pods_of("train"))
    world.cluster.run()
    world.cycle()
    train = world.workload("train")
    assert train.state == "running"
    usage = UsageInterval.objects.get(workload=train)
    assert usage.gpus == 8 and usage.ended_at is None
    cycle = SchedulingCycle.objects.filter(status="succeeded").first()
    assert cycle is not None and cycle.plan_s >= 0 and cycle.record_s > 0


def test_pods_created_with_kubectl_become_a_workload_and_are_bound(world: World) -> None:
    first = world.cluster.add_pod("train-0", workload="train", gpus=2)
    world.cluster.add_pod("train-1", workload="train", gpus=2)
    world.cycle()  # registered by the sync, then admitted and bound in the same cycle
    train = world.workload("train")
    assert (train.origin, train.state, train.queue.name) == ("bare", "admitted", "team-a")
    assert [(p.count, p.gpus) for p in train.pod_sets.all()] == [(2, 2)]
    assert world.cluster.pods[first].node_name is not None


def test_a_gang_whose_pods_arrive_one_by_one_waits_for_the_missing_ones_then_is_bound_whole(
    world: World,
) -> None:
    gang = {"gpupool.io/min-member": "4"}
    first = world.cluster.add_pod("ring-0", workload="ring", annotations=gang)
    world.cycle()
    ring = world.workload("ring")
    assert (ring.state, ring.pending_reason, ring.min_member) == ("pending", "gang", 1)
    assert "3 of its pods do not exist yet" in ring.pending_detail
    assert world.cycle().counts["sync_writes"] == 0  # registered once, not retried
    for index in (1, 2):
        world.cluster.add_pod(f"ring-{index}", workload="ring", annotations=gang)
    world.cycle()
    ring = world.workload("ring")
    assert (ring.state, ring.pending_reason, ring.min_member) == ("pending", "gang", 3)
    assert world.cluster.pods[first].node_name is None
    world.cluster.add_pod("ring-3", workload="ring", annotations=gang)
    world.cycle()
    ring = world.workload("ring")
    assert (ring.state, ring.min_member) == ("admitted", 4)
    assert [p.count for p in ring.pod_sets.all()] == [4]
    assert all(p.node_name for p in world.cluster.pods_of("ring"))


def test_the_workloads_a_sync_registers_are_held_as_the_database_reads_them_not_read_back(
    world: World,
) -> None:
    flavor("h100-spare", node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-SPARE"})
    world.cycle()
    world.cluster.add_pod("big-0", workload="big", gpus=16)  # fits no node: stays pending
    world.cluster.add_pod("big-1", workload="big", gpus=16)
    world.cluster.add_pod(
        "late",
        gpus=16,
        annotations={
            "gpupool.io/expected-runtime": "600",
            "gpupool.io/min-member": "1",
            "gpupool.io/priority-class": "high",
        },
    )
    counts = world.cycle().counts
    assert counts["rows_reread"] == 0  # the sync put them into the state as it wrote them
    state = world.loop.state
    database = read_workloads(moment(world.cluster.now()))
    for name in ("team-a/big", "team-a/late"):
        assert state.rows[name] == database[name]
        assert len(state.rows[name].info.pod_sets[0].flavors) == 2  # a further choice too
    late = world.workload("late")
    assert (late.priority_class.name, late.expected_runtime_s) == ("high", 600)


def test_the_snapshot_reads_the_database_again_only_when_the_sync_wrote_what_it_cannot_put(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst's cycle -- new workloads registered, earlier ones starting -- puts all the sync
    wrote into the loop's state: one read of the database a cycle (the sync's). A gang's
    new member (its pod sets written again) is read back by the snapshot's refresh."""
    refreshes: list[Any] = []
    real = LoopState.refresh

    def counted(self: LoopState, now: Any) -> None:
        refreshes.append(now)
        real(self, now)

    world.cycle()
    monkeypatch.setattr(LoopState, "refresh", counted)
    gang = {"gpupool.io/min-member": "2"}
    world.cluster.add_pod("ring-0", workload="ring", annotations=gang)
    world.cluster.add_pod("solo-0", workload="solo")
    world.cycle()  # registers both, admits solo
    assert len(refreshes) == 1
    world.cluster.run()  # solo's pod runs: the next sync starts it
    world.cluster.add_pod("ring-1", workload="ring", annotations=gang)  # ring's pod sets anew
    refreshes.clear()
    world.cycle()
    assert len(refreshes) == 2
    assert world.workload("ring").state == "admitted"
    refreshes.clear()
    world.cluster.run()
    world.cycle()  # ring starts: put as written
    assert len(refreshes) == 1
    assert world.workload("ring").state == world.workload("solo").state == "running"
    assert world.loop.state.rows["team-a/ring"].state == "running"


def test_the_pods_of_a_sync_are_registered_in_one_audited_action_and_a_bad_one_is_refused(
    world: World,
) -> None:
    def registration(name: str, queue: str = "team-a") -> Registration:
        shape = PodSetShape("set-0", 1, 1, (world.h100.pk,), None, Decimal(1), Decimal(1))
        return Registration(
            WorkloadKey("team-a", name), queue, None, (shape,), "bare", at, None, "", None, None
        )

    at = timezone.now()
    good = [registration(f"p{i}") for i in range(3)]
    bad = [registration("lost", queue="nope"), registration("inner", queue="root")]
    decision = SyncDecision(at=at, registrations=[*good, *bad])
    complaints = do_record_cluster_sync(decision)
    assert complaints[0] == "team-a/lost: Queue matching query does not exist."
    assert complaints[1].startswith("team-a/inner: ") and "child queues" in complaints[1]
    made = Workload.objects.filter(namespace="team-a").order_by("name")
    assert [(w.name, w.origin, w.state) for w in made] == [
        (f"p{i}", "bare", "pending") for i in range(3)
    ]
    assert all(w.transitions.get().reason == "submitted" for w in made)
    (audit,) = AuditEvent.objects.filter(action="control.register_workloads")
    assert audit.after["workloads"] == 3


def test_a_registration_whose_name_was_taken_meanwhile_is_refused_and_the_others_registered(
    world: World,
) -> None:
    """The bulk path does not look for the names first: the unique constraint refuses the
    batch, and each registration goes one by one, the taken one refused with its reason."""
    world.submit("taken")
    shape = PodSetShape("set-0", 1, 1, (world.h100.pk,), None, Decimal(1), Decimal(1))
    at = timezone.now()
    decision = SyncDecision(
        at=at,
        registrations=[
            Registration(WorkloadKey("team-a", n), "team-a", None, (shape,), "bare", at, None, "",
                         None, None)
            for n in ("fresh-0", "taken", "fresh-1")
        ],
    )  # fmt: skip
    registered: list[Any] = []
    complaints = do_record_cluster_sync(decision, registered=registered)
    assert len(complaints) == 1 and complaints[0].startswith("team-a/taken: ")
    assert "already has a workload of this name" in complaints[0]
    assert registered == []  # none in bulk: read back by the next refresh
    made = Workload.objects.filter(name__startswith="fresh").order_by("name")
    assert [(w.name, w.origin) for w in made] == [("fresh-0", "bare"), ("fresh-1", "bare")]
    assert world.workload("taken").origin == "gpupool"


@pytest.mark.django_db(transaction=True)
def test_a_bursts_new_workloads_are_written_in_the_transaction_that_admits_them(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the sync checks the new pods' workloads and draws their ids (in no
    transaction), and the cycle's record inserts them with their admissions: one transaction
    before the first binding, not two. Its rows and the loop's state agree (nothing is read
    back)."""
    if connection.vendor != "postgresql":
        pytest.skip("the registrations are written by the sync's own transaction elsewhere")
    world.cycle()
    synced: list[object] = []
    real = loop_module.do_record_cluster_sync
    monkeypatch.setattr(
        loop_module,
        "do_record_cluster_sync",
        lambda decision, **options: synced.append(decision) or real(decision, **options),
    )
    world.cluster.add_pod("solo-0", workload="solo")
    world.cluster.add_pod("big-0", workload="big", gpus=16)  # fits no node: stays pending
    counts = world.cycle().counts
    assert synced == []  # nothing but new workloads: the sync wrote nothing itself
    assert counts["admitted"] == 1
    solo, big = world.workload("solo"), world.workload("big")
    assert (solo.state, big.state) == ("admitted", "pending")

    def xmin(model: Any, **lookup: Any) -> int:
        """The transaction that wrote the row (PostgreSQL's system column)."""
        written = model.objects.filter(**lookup).annotate(by=RawSQL("xmin::text", ()))
        return int(written.values_list("by", flat=True).get())

    registered = xmin(WorkloadTransition, workload=solo, to_state="pending")
    admitted = xmin(WorkloadTransition, workload=solo, to_state="admitted")
    # The record writes the registrations in a savepoint of its transaction (a name taken
    # meanwhile leaves only that one out: ``actions._write_registrations``): their rows carry
    # the savepoint's own id, which PostgreSQL draws after its transaction's, not a later
    # transaction's (the sync wrote nothing: ``synced`` is empty).
    assert admitted < registered <= admitted + 2
    assert registered == xmin(WorkloadTransition, workload=big, to_state="pending")
    (audit,) = AuditEvent.objects.filter(action="control.register_workloads")
    assert audit.after["workloads"] == 2
    assert world.cycle().counts["rows_reread"] == 0  # held as written, admission included
    database = read_workloads(moment(world.cluster.now()))
    for name in ("team-a/solo", "team-a/big"):
        assert world.loop.state.rows[name] == database[name]


def test_a_cycle_that_fails_before_its_record_leaves_no_half_registration(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync's registrations are in the loop's state before the record writes them (on
    PostgreSQL): a cycle failing in between writes none of them and forgets its state, and
    the next cycle registers them, once."""
    world.cycle()
    world.cluster.add_pod("solo-0", workload="solo")
    real = loop_module.run_cycle

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the plan broke")

    monkeypatch.setattr(loop_module, "run_cycle", broken)
    failed = world.loop.run_cycle()
    assert failed.status == "failed" and "the plan broke" in (failed.error or "")
    if connection.vendor == "postgresql":  # elsewhere the sync's own transaction wrote it
        assert not Workload.objects.filter(name="solo").exists()
        assert not AuditEvent.objects.filter(action="control.register_workloads").exists()
    assert "team-a/solo" not in world.loop.state.rows  # forgotten with the state
    monkeypatch.setattr(loop_module, "run_cycle", real)
    world.cycle()
    assert world.workload("solo").state == "admitted"
    assert Workload.objects.filter(name="solo").count() == 1
    assert AuditEvent.objects.filter(action="control.register_workloads").count() == 1


def test_registrations_are_checked_against_the_policy_as_it_is_when_they_come(
    world: World,
) -> None:
    """The loop keeps the rows registrations are checked against from one cycle to the next
    and reads them again when the policy tables change: a new default class, a queue that
    gained a child queue (workloads go to leaves) are seen by the next registration."""
    world.cluster.add_pod("before-0", workload="before")
    world.cycle()
    assert world.workload("before").priority_class.name == "normal"
    high = PriorityClass.objects.get(name="high")
    high.default = True  # moves the default off normal (there is always one)
    do_save_priority_class(high, acting_user=None)
    # A busy leaf the actions refuse to make a parent (its work would be stranded), made one
    # directly: the loop still must not register new work on a queue that is no leaf.
    Queue.objects.create(name="team-a-child", parent=world.queues["team-a"])
    world.cluster.add_pod("after-0", workload="after", queue="team-b", namespace="team-b")
    intruder = world.cluster.add_pod("leafless-0", workload="leafless")
    world.cycle()
    assert world.workload("after", "team-b").priority_class.name == "high"
    assert not Workload.objects.filter(name="leafless").exists()
    assert not world.cluster.pods[intruder].node_name


def test_the_rows_registrations_are_checked_against_are_read_between_cycles(
    world: World,
) -> None:
    """On PostgreSQL the loop reads them after a cycle while the policy tables stay, so the
    first cycle of a burst, which registers its pods, does not read them."""
    if connection.vendor != "postgresql":
        pytest.skip("elsewhere the policy tables are read every cycle")
    world.cycle()
    assert world.loop.state.registration_policy is not None
    world.cluster.add_pod("solo-0", workload="solo")
    with CaptureQueriesContext(connection) as queries:
        world.cycle()
    assert world.workload("solo").state == "admitted"
    policy = (
        'FROM "quotas_queue"',
        'FROM "quotas_priorityclass"',
        'FROM "tenancy_tenantnamespace"',
    )
    reads = [q["sql"] for q in queries.captured_queries if "clock_timestamp()" not in q["sql"]]
    assert not [sql for sql in reads if any(table in sql for table in policy)]  # but the digest


def test_pods_that_name_another_tenants_queue_are_never_scheduled_and_told_why(
    world: World,
) -> None:
    intruder = world.cluster.add_pod("sneaky", namespace="team-a", queue="team-b")
    world.cluster.add_pod("honest", namespace="team-b", queue="team-b")
    world.cycle()
    world.cycle()
    assert not world.cluster.pods[intruder].node_name
    assert world.workload("honest", "team-b").state == "admitted"
    (event,) = world.cluster.events_on(intruder)
    assert event[0] == "FailedScheduling" and event[2] == "Warning"
    assert "belongs to tenant b, not to a, which owns namespace team-a" in event[1]


def test_a_namespace_given_to_another_tenant_between_two_cycles_is_seen_by_the_next(
    world: World,
) -> None:
    """The namespaces' tenants are read with the policy tables, when their digest changes:
    a namespace moved between cycles changes it, and the next sync decides on the new owner."""
    world.cycle()
    team_b = world.queues["team-b"].tenant
    assert team_b is not None
    do_save_tenant(team_b, namespaces=("team-b", "shared"), acting_user=None)
    world.cluster.add_pod("moved", namespace="shared", queue="team-b")
    world.cycle()
    assert world.workload("moved", "shared").state == "admitted"


def test_a_malformed_annotation_is_named_and_the_others_are_still_scheduled(
    world: World,
) -> None:
    bad = world.cluster.add_pod("bad", annotations={"gpupool.io/min-member": "four"})
    world.cluster.add_pod("good")
    world.cycle()
    world.cycle()
    assert world.workload("good").state == "admitted"
    assert not world.cluster.pods[bad].node_name
    messages = [m for _, m, _ in world.cluster.events_on(bad)]
    assert any('gpupool.io/min-member: "four" is not a whole number' in m for m in messages)
    assert len(messages) == 1  # said once, not every cycle


def test_a_registered_workload_whose_annotation_turns_malformed_says_why_it_is_left_out(
    world: World,
) -> None:
    """Its explanation (the API's, the CLI's, the page's) names what is wrong, where it said
    "Waiting for the next scheduling cycle to look at it" for as long as it stayed so; once
    the annotation is fixed, it is planned again."""
    from gpupool.inventory.units import FlavorUnits
    from gpupool.workloads.queries import AS_WRITTEN, summary

    for node in ("n1", "n2"):  # its queue's capability (16) taken, at its own priority
        world.submit(f"filler-{node}", gpus=8)
    world.cycle()
    world.cycle()
    pod = world.cluster.add_pod("later-bad", gpus=8)
    world.cycle()
    assert world.workload("later-bad").state == "pending"
    world.cluster.annotate(pod, **{"gpupool.io/min-member": "four"})
    world.cycle()

    said = summary(world.workload("later-bad"), seen=AS_WRITTEN, units=FlavorUnits())
    assert said.startswith("gpupool does not schedule it: its pods' gpupool.io labels")
    assert 'gpupool.io/min-member: "four" is not a whole number' in said
    assert world.workload("later-bad").queue_position is None
    world.cluster.annotate(pod, **{"gpupool.io/min-member": "1"})
    world.cycle()
    assert "labels or annotations" not in summary(
        world.workload("later-bad"), seen=AS_WRITTEN, units=FlavorUnits()
    )


def test_a_protected_runtime_above_the_queues_free_maximum_is_capped_and_said(
    world: World,
) -> None:
    queue = world.queues["team-a"]
    queue.max_protected_runtime_s = 3600
    from gpupool.quotas.actions import do_save_queue

    do_save_queue(queue, acting_user=None)
    pod = world.cluster.add_pod("long", annotations={"gpupool.io/protected-runtime": "4h"})
    world.cycle()
    assert world.workload("long").protected_runtime_s == 3600
    assert any(
        "capped to queue team-a's free maximum of 3600s" in m
        for _, m, _ in world.cluster.events_on(pod)
    )


def test_a_workload_whose_pods_all_succeed_ends_so_and_its_usage_closes(world: World) -> None:
    pod = world.cluster.add_pod("job", gpus=1)
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    world.cluster.tick(600)
    world.cluster.finish(pod)
    world.cycle()
    job = world.workload("job")
    assert job.state == "succeeded"
    usage = UsageInterval.objects.get(workload=job)
    assert usage.ended_at is not None
    assert 0.16 < float(usage.gpu_hours(usage.ended_at)) < 0.18  # ten minutes of one GPU


def test_a_failed_pod_fails_its_workload(world: World) -> None:
    pod = world.cluster.add_pod("job")
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    world.cluster.finish(pod, "Failed")
    world.cycle()
    assert world.workload("job").state == "failed"


def test_pods_that_come_back_under_an_ended_workloads_name_are_told_why_they_wait(
    world: World,
) -> None:
    """A pod comes back under the label of a workload that ended: here a bare pod's name
    reused by hand (a Job's controller recreating the pods of work reclaimed for sitting
    idle is the other case; a Job that retries a failed pod while it is active gets its retry
    run instead: test_loop_job_retries.py). The workload's end is final, so the new pod is
    never scheduled; it used to wait without a word."""
    pod = world.cluster.add_pod("job")
    world.cycle()
    world.cycle()
    world.cluster.run()
    world.cycle()
    world.cluster.finish(pod, "Failed")
    world.cycle()
    retry = world.cluster.add_pod("job-retry", workload="job")
    world.cycle()
    world.cycle()
    assert world.workload("job").state == "failed"
    assert not world.cluster.pods[retry].node_name
    (event,) = world.cluster.events_on(retry)
    assert event[0] == "FailedScheduling" and event[2] == "Warning"
    assert "workload team-a/job has ended (failed)" in event[1]
    assert "gpupool.io/workload" in event[1]


def test_a_gang_whose_binding_fails_goes_back_to_pending_with_none_left_bound(
    world: World,
) -> None:
    world.submit("gang", gpus=4, count=2)
    world.cycle()
    pods = world.cluster.pods_of("gang")
    world.cluster.fail_binding.add(pods[1].key)
    world.cycle()
    gang = world.workload("gang")
    assert gang.state == "pending"
    assert not any(p.node_name for p in world.cluster.pods_of("gang"))
    last = gang.transitions.order_by("-id").first()
    assert last is not None and last.reason.startswith("binding failed")
    world.cluster.fail_binding.clear()
    world.cycle()
    assert world.workload("gang").state == "admitted"
    assert all(p.node_name for p in world.cluster.pods_of("gang"))


def test_a_pods_node_selector_is_honoured_through_its_allowed_nodes(world: World) -> None:
    world.cluster.change_node("n2", labels={**world.cluster.nodes["n2"].labels, "pool": "x"})
    world.cluster.add_pod("picky", gpus=1)
    pod = world.cluster.pods[("team-a", "picky")]
    from dataclasses import replace

    world.cluster.pods[pod.key] = replace(pod, node_selector={"pool": "x"})
    world.cycle()
    assert world.cluster.pods[pod.key].node_name == "n2"
    assert world.workload("picky").placements.get().node.name == "n2"


def test_pods_of_other_schedulers_count_as_occupied_capacity(world: World) -> None:
    from gpupool.clusters.base import ResourceAmounts

    world.cluster.foreign["n1"] = ResourceAmounts(1000, 1024, 8)  # n1's GPUs all taken
    world.submit("whole", gpus=8, count=2)
    world.cycle()
    world.cycle()
    whole = world.workload("whole")
    # Taken, not gone: it waits in line with its pods made, not "never fits" (the GPUs were
    # read as failed, which set it aside with no place and no pods until they left). What
    # gpupool may allocate now is n2's 8 GPUs: the quota layer says so first.
    assert whole.state == "pending" and whole.pending_reason == "quota"
    assert not whole.pending_facts.get("never_fits") and whole.queue_position == 1
    world.cluster.foreign.clear()
    world.cycle()
    assert world.workload("whole").state == "admitted"


def test_a_checkpoint_annotation_reaches_the_workload(world: World) -> None:
    from datetime import UTC, datetime

    pod = world.cluster.add_pod("ckpt", gpus=1)
    world.cycle()
    world.cluster.run()
    world.cycle()
    world.cluster.tick(120)
    moment = datetime.fromtimestamp(world.cluster.clock - 60, tz=UTC).replace(microsecond=0)
    world.cluster.annotate(pod, **{"gpupool.io/last-checkpoint": moment.isoformat()})
    world.cycle()
    assert world.workload("ckpt").last_checkpoint_at == moment


def test_a_workload_that_runs_and_ends_between_two_cycles_is_recorded_as_both(
    world: World,
) -> None:
    pod = world.cluster.add_pod("quick")
    world.cycle()
    world.cluster.run()
    world.cluster.finish(pod)
    world.cycle()
    quick = world.workload("quick")
    assert quick.state == "succeeded"
    assert [t.to_state for t in quick.transitions.order_by("id")] == [
        "pending",
        "admitted",
        "running",
        "succeeded",
    ]


def test_the_pods_of_a_submitted_workload_run_what_its_pod_set_says(world: World) -> None:
    from gpupool.workloads.actions import PodSetSpec, do_submit_workload

    do_submit_workload(
        "train",
        queue=world.queues["team-a"],
        pod_sets=[
            PodSetSpec(
                2,
                gpus=1,
                flavor=world.h100,
                image="nvcr.io/nvidia/pytorch:24.05-py3",
                command=["python", "train.py"],
                env={"EPOCHS": "3"},
            )
        ],
    )
    world.cycle()
    made = [pod for pod in world.cluster.created if pod.labels["gpupool.io/workload"] == "train"]
    assert [p.name for p in made] == ["train-main-0", "train-main-1"]
    assert {(p.image, p.command, tuple(p.env.items())) for p in made} == {
        ("nvcr.io/nvidia/pytorch:24.05-py3", ("python", "train.py"), (("EPOCHS", "3"),))
    }
    assert made[0].labels["gpupool.io/queue"] == "team-a"


def test_the_submitter_is_told_when_the_workload_starts(
    world: World, mailoutbox: list[Any], django_capture_on_commit_callbacks: Any
) -> None:
    from domain_builders import user

    from gpupool.tenancy.actions import do_set_membership
    from gpupool.tenancy.models import Tenant

    alice = user("alice")
    alice.email = "alice@example.com"
    alice.save()
    do_set_membership(alice, Tenant.objects.get(name="a"), role="member", acting_user=None)
    world.submit("mine", gpus=1, submitter=alice)
    world.cycle()
    world.cycle()
    world.cluster.run()
    with django_capture_on_commit_callbacks(execute=True):
        world.cycle()
    assert world.workload("mine").state == "running"
    assert [m.subject for m in mailoutbox] == ["[gpupool] team-a/mine started"]


def test_a_node_that_vanished_while_no_loop_ran_is_marked_gone(world: World) -> None:
    from fake_cluster import FakeCluster

    from gpupool.control.loop import ControlLoop

    world.cycle()
    restarted = FakeCluster(nodes={"n1": world.cluster.nodes["n1"]})  # n2 went meanwhile
    assert ControlLoop(restarted).run_cycle().status == "succeeded"
    gone, kept = Node.objects.get(name="n2"), Node.objects.get(name="n1")
    assert gone.gone_at is not None and gone.cluster_exclusion == "gone from the cluster"
    assert kept.gone_at is None


def test_a_workload_only_the_cycles_first_read_sees_still_gets_its_pods(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cycle reads the database twice (before its sync, and after it for the snapshot); a
    workload submitted long enough before the cycle is seen by the first read only. Its pods
    are made all the same. (Found in the browser: a workload submitted from the page, then left
    for longer than the read's safety margin, waited for its pods for ever.)"""
    import time

    from gpupool.control import state

    monkeypatch.setattr(state, "CLOCK_MARGIN_S", 0.0)
    monkeypatch.setattr(state, "SQLITE_MARGIN_S", 0.0)
    world.cycle()
    world.submit("late", gpus=1)
    time.sleep(0.05)
    world.cycle()
    made = [p.name for p in world.cluster.created if p.labels["gpupool.io/workload"] == "late"]
    assert made == ["late-main-0"]
    world.cycle()  # admits and binds it
    assert all(p.node_name for p in world.cluster.pods_of("late"))
    world.cluster.run()
    world.cycle()
    assert world.workload("late").state == "running"


def test_the_pool_clock_is_the_clusters_time_at_the_last_cycle(world: World) -> None:
    """A simulated cluster runs ahead of the wall clock that stamps the cycle's row; the pages,
    the utilisation API and the CLI count back from the cluster's time, as the usage and the
    activity the loop records are stamped."""
    from datetime import UTC, datetime

    from gpupool.control.clock import pool_clock

    world.cluster.tick(6 * 3600)
    world.cycle()
    clock = pool_clock()
    assert abs((clock - datetime.fromtimestamp(world.cluster.now(), tz=UTC)).total_seconds()) < 5
    assert (clock - timezone.now()).total_seconds() > 5 * 3600


def test_the_pages_snapshot_reads_a_pool_whose_cluster_runs_ahead_of_the_wall_clock(
    world: World,
) -> None:
    """The demo's simulated cluster runs hours ahead of the wall clock, and admits work at
    its own time. The pages' snapshot (Fragmentation, the Queues page's usage, the dry-run,
    the approvals' impact) was taken at the wall clock and refused that work as "started
    after the snapshot's time": every one of them answered an error after the demo's first
    minute. It is now taken at the pool's clock, and never before the latest admission."""
    from gpupool.control.queries import pool_figures, pool_snapshot, snapshot_time

    world.cluster.tick(6 * 3600)
    world.submit("ahead", gpus=2)
    world.cycle()
    world.cycle()
    admitted = world.workload("ahead").admitted_at
    assert admitted is not None and (admitted - timezone.now()).total_seconds() > 5 * 3600
    view = pool_snapshot()
    assert "team-a/ahead" in {w.name for w in view.value.snapshot.workloads}
    assert view.at >= admitted
    assert pool_figures().value.shares  # the Queues page's allocated, borrowed and lent
    # A cycle being recorded admits work after the last finished cycle's clock.
    Workload.objects.filter(pk=world.workload("ahead").pk).update(
        admitted_at=admitted + timezone.timedelta(hours=1)
    )
    assert snapshot_time() >= admitted + timezone.timedelta(hours=1)
