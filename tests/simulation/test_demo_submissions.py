"""The demo teams' submissions go through do_submit_workload, into each team's queue."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpupool.cli.subcommands.seed_demo import seed
from gpupool.simulation.demo_submissions import (
    DemoSubmitter,
    DemoWorkloadFeed,
    demo_team_queues,
    pool_gpus,
)
from gpupool.simulation.workload_generator import DemoChoices, DemoSubmission
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db
START = 1_795_946_400.0


@pytest.fixture
def demo_pool(settings: Any) -> Iterator[None]:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    seed()
    yield


def submission(**fields: Any) -> DemoSubmission:
    values: dict[str, Any] = {
        "at": START, "team": "nlp", "serial": 1, "pods": 2, "gpus_per_pod": 4,
        "flavor": "gb200", "gpu_milli": None, "topology": "domain", "priority_class": "high",
        "runtime_s": 1800.0, "expected_runtime_s": 2400,
    }  # fmt: skip
    return DemoSubmission(**{**values, **fields})


def test_the_teams_are_the_seeded_tenants_and_the_pool_counts_healthy_gpus(
    demo_pool: None,
) -> None:
    assert sorted(demo_team_queues()) == ["ads", "nlp", "recsys", "search", "speech", "vision"]
    # 320 H100 less 2 broken, 72 GB200, 16 time-sliced L40S, 32 MIG instances
    assert pool_gpus() == 318 + 72 + 16 + 32


def test_a_submission_becomes_a_pending_workload_of_its_teams_queue(demo_pool: None) -> None:
    submitter = DemoSubmitter(demo_team_queues(), DemoChoices())
    workload = submitter.submit(submission())
    assert workload is not None
    workload.refresh_from_db()
    assert (workload.namespace, workload.name, workload.queue.name) == ("nlp", "train-00001", "nlp")
    assert workload.state == "pending" and workload.topology == "domain"
    assert workload.priority_class.name == "high" and workload.expected_runtime_s == 2400
    assert workload.submitted_at.timestamp() == START
    (pod_set,) = workload.pod_sets.all()
    assert (pod_set.count, pod_set.gpus, pod_set.flavor.name) == (2, 4, "gb200")
    assert (pod_set.cpu, pod_set.memory_gb) == (48, 384)
    assert pod_set.command == ["sleep", "1800"]  # how long it really runs, whatever it declares


def test_a_shared_notebook_asks_a_fraction_at_the_default_class(demo_pool: None) -> None:
    submitter = DemoSubmitter(demo_team_queues(), DemoChoices())
    notebook = submission(pods=1, gpus_per_pod=1, flavor="l40s-shared", gpu_milli=470,
                          topology="", priority_class="")  # fmt: skip
    workload = submitter.submit(notebook)
    assert workload is not None and workload.name == "notebook-00001"
    assert workload.priority_class.default and workload.pod_sets.get().gpu_milli == 470


def test_a_restarted_generator_numbers_after_what_its_teams_have(demo_pool: None) -> None:
    DemoSubmitter(demo_team_queues(), DemoChoices()).submit(submission(serial=7))
    again = DemoSubmitter(demo_team_queues(), DemoChoices()).submit(submission(serial=1))
    assert again is not None and again.name == "train-00008"
    assert Workload.objects.filter(namespace="nlp").count() == 2


def test_the_feed_submits_what_the_generator_says_falls_due(demo_pool: None) -> None:
    feed = DemoWorkloadFeed(seed=42, load=1.0, start=START)
    twin = DemoWorkloadFeed(seed=42, load=1.0, start=START).generator
    due = twin.until(START + 1800)

    submitted = feed.submit_due(START + 1800)

    assert submitted == len(due) > 0
    made = Workload.objects.values_list("namespace", "submitted_at")
    assert sorted((team, round(at.timestamp(), 3)) for team, at in made) == sorted(
        (s.team, round(s.at, 3)) for s in due
    )
    assert feed.next_at() > START + 1800
