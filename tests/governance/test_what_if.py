"""The what-if of a quota request: started by an admin, run in the background with its
progress recorded, its result (each tenant's change in waits) kept with the request."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from domain_builders import period_fields

from gpupool.audit.models import AuditEvent
from gpupool.quotas import whatif
from gpupool.quotas.models import QuotaRequest, WhatIfRun
from gpupool.workloads.actions import PodSetSpec, do_submit_workload

URL = "/api/v1/quota-requests/"
HOUR = 3600
SEND_TO_BACKGROUND = whatif.dispatch_what_if  # the real one (``dispatched`` replaces it)


def record_demand(pool: Any) -> None:
    """Yesterday, at one instant, nlp queued six 8-GPU jobs of an hour each and vision one.

    Today nlp may hold 16 GPUs (capability), so its jobs run two at a time and wait 0, 0, 1,
    1, 2 and 2 hours (mean 1 h). With a capability of 24 they run three at a time beside
    vision's job and wait 0, 0, 0, 1, 1, 1 hours (mean 0.5 h); vision's job never waits.
    """
    yesterday = timezone.now() - timedelta(days=1)
    for tenant, queue, jobs in (("nlp", pool.nlp_queue, 6), ("vision", pool.vision_queue, 1)):
        for index in range(jobs):
            do_submit_workload(
                f"{tenant}-{index}",
                queue=queue,
                pod_sets=[PodSetSpec(count=1, gpus=8, flavor=pool.h100)],
                expected_runtime_s=HOUR,
                at=yesterday,
            )


@pytest.fixture
def dispatched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The runs handed to the background, in order (none is run: the test runs them)."""
    runs: list[int] = []
    monkeypatch.setattr(whatif, "dispatch_what_if", runs.append)
    return runs


@pytest.mark.django_db
def test_an_admin_starts_a_what_if_and_polls_its_progress_and_result(
    pool: Any,
    api_as: Any,
    file_request: Any,
    dispatched: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given demand recorded yesterday and nlp's request to raise its capability to 24
    record_demand(pool)
    request = file_request(payload={"guarantee": 4, "deserved": 8, "capability": 24}, submit=True)
    admin = api_as("ada")
    assert admin.get(f"{URL}{request['id']}/what-if/").status_code == 404
    # when an admin starts a what-if over the last two days
    started = admin.post(f"{URL}{request['id']}/what-if/", {"days": 2}, format="json")
    # then it is queued, audited, and handed to the background once that commits
    assert started.status_code == 202, started.json()
    run = started.json()
    assert (run["state"], run["progress"], run["days"]) == ("queued", 0.0, 2)
    assert dispatched == [run["id"]]
    assert AuditEvent.objects.filter(action="quotas.start_what_if", actor_name="ada").exists()
    # when the background runs it, every step of its progress is on the run as it goes
    seen: list[tuple[str, float, str]] = []
    record = whatif.do_record_what_if_progress

    def watch(run: WhatIfRun, *, progress: float, message: str) -> None:
        record(run, progress=progress, message=message)
        stored = WhatIfRun.objects.get(pk=run.pk)
        seen.append((stored.state, stored.progress, stored.message))

    monkeypatch.setattr(whatif, "do_record_what_if_progress", watch)
    whatif.run_what_if(run["id"])
    fractions = [progress for _, progress, _ in seen]
    assert fractions == sorted(fractions) and len(fractions) > 4
    assert (fractions[0], fractions[1], fractions[-1]) == (0.0, 0.1, 0.95)
    assert {state for state, _, _ in seen} == {"running"}
    messages = [message for _, _, message in seen]
    assert messages[1] == "replaying 7 workloads, today and with the change"
    assert "replaying with today's quotas: 7 of 7 workloads done (replay 1 of 2)" in messages
    assert "replaying with the change: 7 of 7 workloads done (replay 2 of 2)" in messages
    # then polling answers the result: nlp's mean wait falls from 1 h to 0.5 h, vision's
    # stays 0
    polled = admin.get(f"{URL}{request['id']}/what-if/").json()
    assert (polled["state"], polled["progress"], polled["error"]) == ("succeeded", 1.0, "")
    result = polled["result"]
    assert result["jobs"] == 7 and result["days"] == 2
    assert result["wait_changes"]["nlp"]["wait_mean_s"] == {
        "before": HOUR,
        "after": HOUR / 2,
        "change": -HOUR / 2,
    }
    assert result["wait_changes"]["vision"]["wait_mean_s"]["change"] == 0
    # and the latest run is part of the request's impact
    impact = admin.get(f"{URL}{request['id']}/impact/").json()
    assert impact["what_if"]["id"] == run["id"]


@pytest.mark.django_db
def test_a_change_under_which_work_could_never_run_sets_it_aside_saying_why(
    pool: Any, api_as: Any, file_request: Any, dispatched: list[int]
) -> None:
    # nlp's 8-GPU jobs can never run under a capability of 4: the replay with the change
    # sets them aside, as the scheduler would, and says so
    record_demand(pool)
    request = file_request(payload={"guarantee": 0, "deserved": 4, "capability": 4}, submit=True)
    run = api_as("ada").post(f"{URL}{request['id']}/what-if/", {"days": 2}).json()
    whatif.run_what_if(run["id"])
    done = WhatIfRun.objects.get(pk=run["id"])
    assert done.state == "succeeded" and done.result is not None, done.error
    aside = done.result["set_aside"]
    assert aside["before"]["count"] == 0
    assert (aside["after"]["count"], aside["after"]["reasons"]) == (6, {"quota": 6})


@pytest.mark.django_db
def test_one_what_if_of_a_request_runs_at_a_time(
    pool: Any, api_as: Any, file_request: Any, dispatched: list[int]
) -> None:
    request = file_request(submit=True)
    url = f"{URL}{request['id']}/what-if/"
    first = api_as("ada").post(url, {"days": 1}).json()
    again = api_as("alan").post(url, {"days": 1})
    assert again.status_code == 400 and "state" in again.json()["error"]["fields"]
    whatif.run_what_if(first["id"])
    assert api_as("alan").post(url, {"days": 1}).status_code == 202


@pytest.mark.django_db
def test_a_run_lost_with_its_process_does_not_block_a_new_one(
    pool: Any, api_as: Any, file_request: Any, dispatched: list[int]
) -> None:
    request = file_request(submit=True)
    url = f"{URL}{request['id']}/what-if/"
    lost = api_as("ada").post(url, {"days": 1}).json()
    WhatIfRun.objects.filter(pk=lost["id"]).update(
        queued_wall_at=timezone.now() - timedelta(hours=1)
    )
    assert api_as("ada").post(url, {"days": 1}).status_code == 202


@pytest.mark.django_db
def test_a_run_is_run_once_even_if_delivered_twice(
    pool: Any, api_as: Any, file_request: Any, dispatched: list[int]
) -> None:
    request = file_request(submit=True)
    run = api_as("ada").post(f"{URL}{request['id']}/what-if/", {"days": 1}).json()
    assert whatif.run_what_if(run["id"]) is not None
    assert whatif.run_what_if(run["id"]) is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "body", "named"),
    [
        (
            {
                "kind": "budget",
                "tenant": "nlp",
                "queue": None,
                "flavor": None,
                "priority_class": "high",
                "payload": {"gpu_hours": 10},
            },
            {},
            "kind",
        ),
        ({}, {"days": 0}, "days"),
        ({}, {"days": 91}, "days"),
    ],
    ids=["a budget request", "no days", "more than 90 days"],
)
def test_a_what_if_that_cannot_start_answers_400_naming_the_field(
    api_as: Any, file_request: Any, dispatched: list[int], fields: dict, body: dict, named: str
) -> None:
    if fields.get("kind") == "budget":  # this month's period, taken when the test runs
        fields = fields | period_fields()
    request = file_request(**fields, submit=True)
    response = api_as("ada").post(f"{URL}{request['id']}/what-if/", body, format="json")
    assert response.status_code == 400
    assert named in response.json()["error"]["fields"]
    assert dispatched == []


@pytest.mark.django_db
def test_a_decided_request_gets_no_what_if(
    api_as: Any, file_request: Any, dispatched: list[int]
) -> None:
    request = file_request(submit=True)
    api_as("ada").post(f"{URL}{request['id']}/approve/")
    response = api_as("ada").post(f"{URL}{request['id']}/what-if/", {})
    assert response.status_code == 400 and "state" in response.json()["error"]["fields"]


@pytest.mark.django_db
def test_with_a_broker_the_run_goes_to_a_celery_worker(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpupool.quotas.tasks import run_what_if_task

    sent: list[int] = []
    settings.REDIS_URL = "redis://broker:6379/0"
    monkeypatch.setattr(run_what_if_task, "delay", sent.append)
    whatif.dispatch_what_if(7)
    assert sent == [7]
    assert (run_what_if_task.expires, run_what_if_task.time_limit) == (600, 1800)


@pytest.mark.django_db(transaction=True)
def test_without_a_broker_the_run_goes_to_a_thread_of_the_web_process(
    pool: Any, api_as: Any, file_request: Any, settings: Any
) -> None:
    # the embedded default: no broker, so the committed start hands the run to a thread
    settings.REDIS_URL = ""
    record_demand(pool)
    request = file_request(payload={"guarantee": 4, "deserved": 8, "capability": 24}, submit=True)
    run = api_as("ada").post(f"{URL}{request['id']}/what-if/", {"days": 2}).json()
    worker = next(t for t in threading.enumerate() if t.name == f"what-if-{run['id']}")
    worker.join(timeout=60)
    assert not worker.is_alive()
    finished = QuotaRequest.objects.get(pk=request["id"]).latest_what_if()
    assert finished is not None and finished.state == "succeeded", finished and finished.error


def test_a_web_process_sends_tasks_through_gpupools_celery_app() -> None:
    # Only a worker imports ``gpupool.celery`` itself (``-A gpupool``): a process that merely
    # sets Django up (the web server) sent ``.delay()`` to Celery's default app, amqp on
    # localhost, and the demo's what-if runs stayed queued for good.
    import os
    import subprocess
    import sys

    probe = (
        "import django; django.setup(); from celery import current_app; "
        "from gpupool.quotas.tasks import run_what_if_task as task; "
        "print(current_app.main, task.app.main, current_app.conf.broker_url)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpupool.settings"}
    env["REDIS_URL"] = "redis://127.0.0.1:6399/3"
    answer = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert answer.stdout.split() == ["gpupool", "gpupool", "redis://127.0.0.1:6399/3"]


@pytest.mark.django_db
def test_a_run_no_worker_could_be_sent_fails_saying_why(
    pool: Any,
    api_as: Any,
    file_request: Any,
    dispatched: list[int],
    settings: Any,
) -> None:
    from gpupool.celery import app

    request = file_request(submit=True)
    run = api_as("ada").post(f"{URL}{request['id']}/what-if/", {"days": 2}).json()
    assert dispatched == [run["id"]]
    # a broker that answers nobody: the send fails after the publisher's few quick retries
    settings.REDIS_URL = "redis://127.0.0.1:9/0"
    saved = app.conf.task_always_eager, app.conf.broker_url
    app.conf.task_always_eager, app.conf.broker_url = False, settings.REDIS_URL
    forget_connections(app)  # a suite with a broker has connected to it already
    try:
        SEND_TO_BACKGROUND(run["id"])
    finally:
        app.conf.task_always_eager, app.conf.broker_url = saved
        forget_connections(app)
    failed = WhatIfRun.objects.get(pk=run["id"])
    assert failed.state == "failed" and "could not be sent to a worker" in failed.error


def forget_connections(app: Any) -> None:
    """Forget which connection pool the app uses, so the next send takes the pool of its
    broker_url now. Nothing is closed: the pools are kombu's, one per broker for the whole
    process, and the suite's other tests go on using the real broker's."""
    app._pool = None
    app.amqp._producer_pool = None
