"""Walk s23, against a live test server: a refusal of a step in the state its target is in
read "gpupool: state: nlp/x has already ended: it is cancelled. Nothing was changed." in the
CLI, while the workload's page says "nlp/x was not cancelled: nlp/x has already ended: ..."
(the sentence names its state itself; the pages' field words say ``state`` as nothing). The
CLI says it as the page does; ``--json`` keeps the API's error object, field and all. And a
submission from flags was refused naming only the API's field ("pod_sets.0.image: This field
is required.", which no flag is called): the flag that sets it is named beside it. And
``status`` says pending work no cycle has looked at in My workloads' words, and ``why`` says
the facts that are moments as times, as the workload page does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from client_cli import run
from django.test import Client
from domain_builders import flavor, node
from two_teams import Pool, two_teams

from gpupool.api.errors import SELF_NAMING_FIELDS
from gpupool.client.main import TIME_FACTS, fact_value
from gpupool.dashboard.facts import FACTS, Kind
from gpupool.dashboard.forms import FIELD_WORDS
from gpupool.workloads.actions import TOO_MANY_GPUS_PER_POD

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pool(live_client: Any) -> Pool:
    """Teams nlp (lead lena, member max) and vision, one 8-GPU node n1; the client talks to
    the live server as max."""
    made = two_teams(lambda h100: node("n1", h100, gpus=8), ("fin", "lena", "max", "vera"))
    live_client(made.users["max"])
    return made


def test_the_apis_self_naming_fields_are_the_pages() -> None:
    assert {field for field, words in FIELD_WORDS.items() if words == ""} == SELF_NAMING_FIELDS


def test_cancelling_work_that_ended_says_why_without_the_field_name(pool: Pool) -> None:
    submit = ("submit", "--name", "x", "--queue", "nlp", "--gpus", "1", "--flavor", "h100")
    status, _, err = run(*submit, "--image", "python:3.12")
    assert status == 0, err
    status, out, err = run("cancel", "nlp/x")
    assert status == 0 and out.startswith("Cancelled nlp/x.\n"), err
    status, out, err = run("cancel", "nlp/x")
    assert status == 1 and out == ""
    assert err.startswith("gpupool: nlp/x has already ended: it is cancelled."), err
    assert "state:" not in err
    status, _, err = run("--json", "cancel", "nlp/x")
    assert status == 1
    error = json.loads(err)["error"]
    assert list(error["fields"]) == ["state"]  # the API's own object, as it sent it
    assert error["fields"]["state"][0].startswith("nlp/x has already ended")


# --------------------------------------------------------------- refusals name their flags


def test_a_refused_submission_from_flags_names_the_flag(pool: Pool) -> None:
    """``gpupool submit --name x --queue nlp --gpus 1 --flavor h100`` was refused with
    "pod_sets.0.image: This field is required.", a name no flag has: the flag is said too."""
    flags = ("--name", "x", "--queue", "nlp", "--gpus", "1", "--flavor", "h100")
    for verb in ("submit", "dry-run"):
        status, out, err = run(verb, *flags)
        assert (status, out) == (1, ""), verb
        assert err == "gpupool: pod_sets.0.image (--image): This field is required.\n", verb
    status, _, err = run("dry-run", *flags, "--image", "python:3.12", "--min-member", "5")
    assert status == 1
    assert err.startswith("gpupool: min_member (--min-member): "), err


def test_a_field_from_the_file_is_named_as_the_file_names_it(pool: Pool, tmp_path: Any) -> None:
    job = tmp_path / "job.json"
    job.write_text('{"name": "f", "queue": "nlp", "pod_sets": [{"count": 1, "flavor": "h100"}]}')
    status, _, err = run("dry-run", str(job), "--gpus", "1", "--count", "0")
    assert status == 1
    flagged, from_file = err.splitlines()
    assert flagged.startswith("gpupool: pod_sets.0.count (--count): ")
    assert from_file == "pod_sets.0.image: This field is required."  # the file's: no flag here
    status, _, err = run("--json", "dry-run", str(job), "--gpus", "1", "--count", "0")
    error = json.loads(err)["error"]
    assert "(--count)" not in error["message"]  # the API's own object, as it sent it
    assert set(error["fields"]) == {"pod_sets.0.count", "pod_sets.0.image"}


def test_gpus_past_the_flavors_largest_node_name_the_flag_and_the_flavors_rule(
    pool: Pool, tmp_path: Any
) -> None:
    """Past the core's bound too (99 > 64): the flavor's rule, not the core's bound, which
    stays for a flavor with no node yet (``workloads.actions.pod_set_spec_errors``)."""
    job = tmp_path / "job.json"
    job.write_text(
        '{"name": "f", "queue": "nlp", "pod_sets": [{"count": 1, "flavor": "h100", '
        '"image": "python:3.12"}]}'
    )
    status, _, err = run("dry-run", str(job), "--gpus", "99")
    assert status == 1
    assert err == (
        "gpupool: pod_sets.0.gpus (--gpus): 99 GPUs per pod, and a pod runs on one node: the "
        "largest h100 node has 8\n"
    )
    flavor("gb300")  # no node of it yet
    status, _, err = run("dry-run", str(job), "--gpus", "99", "--flavor", "gb300")
    assert status == 1
    assert err == f"gpupool: pod_sets.0.gpus (--gpus): 99 GPUs per pod: {TOO_MANY_GPUS_PER_POD}\n"


def test_status_says_work_no_cycle_looked_at_in_the_pages_words(pool: Pool) -> None:
    """``gpupool status`` said "not seen yet" where My workloads says "not looked at by a
    cycle yet" of the same work (pending, no explanation)."""
    flags = ("--name", "x", "--queue", "nlp", "--gpus", "1", "--flavor", "h100")
    assert run("submit", *flags, "--image", "python:3.12")[0] == 0
    status, out, err = run("status")
    assert status == 0, err
    [row] = [line for line in out.splitlines() if line.startswith("nlp/x ")]
    assert row.split()[2:4] == ["pending", "1"]
    assert row.endswith("  not looked at by a cycle yet")  # its REASON, the last column
    page = Client()
    page.force_login(pool.users["max"])
    assert "not looked at by a cycle yet" in page.get("/workloads/").content.decode()


# ------------------------------------------------------------------ facts that are moments


def test_the_clients_moment_facts_are_the_pages() -> None:
    moments = {key for key, fact in FACTS.items() if fact.kind is Kind.TIME}
    assert set(TIME_FACTS) == moments


def test_why_says_a_facts_moments_as_times() -> None:
    """``gpupool why`` of work backed off said ``until=1796741536.034`` (POSIX seconds, as the
    loop writes it) where its page says "until 2026-12-08 14:52 UTC"; and a replay's bound as
    ``2026-12-07T14:19:15.312271+00:00``."""
    backoff = {"caused_by": "tenant", "preemptions": 11, "until": 1796741536.034}
    assert fact_value(backoff, "backoff") == (
        "{caused_by=tenant, preemptions=11, until=2026-12-08 14:52 UTC}"
    )
    bound = "2026-12-07T14:19:15.312271+00:00"
    assert fact_value(bound, "estimate_not_before") == "2026-12-07 14:19 UTC"
    assert fact_value(3600, "window_s") == "3600"  # not a moment
    assert fact_value("soon", "until") == "soon"  # no time: as it is
