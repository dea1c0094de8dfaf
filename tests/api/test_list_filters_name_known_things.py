"""Every list's filter that names a thing of the pool (a tenant, queue, flavor, priority class
or user) refuses a name that names nothing with a 400 naming the filter, in the words a body
gets for the same name ("No queue named nosuch."), as the requests list does: an empty list
would read as "nothing there" (``gpupool status --queue nosuch``: "no workloads"). A known name
with nothing to list, or naming another team's rows, is still an empty list; a filter over
names without a table (``namespace``) still compares."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.cache import cache
from domain_builders import flavor, queue, tenant, user
from resources_pool import pool

from gpupool.api.actions import do_issue_token
from gpupool.client.main import main

API = "/api/v1/"

# (list, filter, what it names, a role that may read the list)
NAME_FILTERS = [
    ("workloads/", "queue", "queue", "member"),
    ("workloads/", "tenant", "tenant", "member"),
    ("workloads/", "submitter", "user", "member"),
    ("budgets/", "tenant", "tenant", "finance"),
    ("budgets/", "priority_class", "priority class", "member"),
    ("queues/", "tenant", "tenant", "member"),
    ("queues/", "parent", "queue", "member"),
    ("memberships/", "tenant", "tenant", "member"),
    ("memberships/", "user", "user", "lead"),
    ("nodes/", "flavor", "flavor", "member"),
    ("preemptions/", "queue", "queue", "member"),
    ("preemptions/", "tenant", "tenant", "admin"),
    ("preemptions/", "preemptor_queue", "queue", "member"),
    ("preemptions/", "preemptor_tenant", "tenant", "member"),
    ("usage/", "tenant", "tenant", "finance"),
    ("usage/", "queue", "queue", "lead"),
    ("usage/", "flavor", "flavor", "admin"),
]


@pytest.fixture
def resources(world: Any) -> dict[str, Any]:
    return pool(world)


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "field", "what", "role"), NAME_FILTERS)
def test_an_unknown_name_is_a_400_naming_the_filter(
    api_as: Any, resources: dict[str, Any], path: str, field: str, what: str, role: str
) -> None:
    answer = api_as(role).get(API + path, {field: "nosuch"})
    assert answer.status_code == 400, answer.content
    assert answer.json()["error"]["fields"] == {field: [f"No {what} named nosuch."]}


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "field", "what", "role"), NAME_FILTERS)
def test_a_known_name_still_filters(
    api_as: Any, resources: dict[str, Any], path: str, field: str, what: str, role: str
) -> None:
    known = {
        "queue": "vision-train",
        "parent": "root",
        "tenant": "vision",
        "preemptor_queue": "vision-train",
        "preemptor_tenant": "vision",
        "submitter": "vera",
        "user": "lena",
        "priority_class": "urgent",
        "flavor": "h100",
    }[field]
    answer = api_as(role).get(API + path, {field: known})
    assert answer.status_code == 200, answer.content


@pytest.mark.django_db
def test_another_teams_name_is_an_empty_list_not_unknown(
    api_as: Any, resources: dict[str, Any]
) -> None:
    """A member of nlp sees none of vision's workloads, but vision is a tenant every role
    reads: the list is empty, and says nothing false."""
    answer = api_as("member").get(API + "workloads/", {"tenant": "vision"})
    assert answer.status_code == 200
    assert answer.json()["results"] == []
    mine = api_as("member").get(API + "workloads/", {"tenant": "nlp", "submitter": "lena"})
    assert [row["name"] for row in mine.json()["results"]] == ["train-1"]


@pytest.mark.django_db
def test_each_unknown_name_is_named_at_once(api_as: Any, resources: dict[str, Any]) -> None:
    answer = api_as("admin").get(
        API + "preemptions/", {"queue": "nosuch", "tenant": "nlp", "preemptor_tenant": "nope"}
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {
        "queue": ["No queue named nosuch."],
        "preemptor_tenant": ["No tenant named nope."],
    }


@pytest.mark.django_db
def test_parent_null_is_the_root_not_a_name(api_as: Any, resources: dict[str, Any]) -> None:
    answer = api_as("member").get(API + "queues/", {"parent": "null"})
    assert answer.status_code == 200
    assert [row["name"] for row in answer.json()["results"]] == ["root"]


@pytest.mark.django_db
def test_a_name_holding_a_nul_is_the_forms_400(api_as: Any, resources: dict[str, Any]) -> None:
    answer = api_as("member").get(API + "workloads/", {"queue": "no\x00such"})
    assert answer.status_code == 400
    assert list(answer.json()["error"]["fields"]) == ["queue"]


@pytest.mark.django_db
def test_a_namespace_is_no_table_and_still_compares(api_as: Any, resources: dict[str, Any]) -> None:
    answer = api_as("member").get(API + "workloads/", {"namespace": "nosuch"})
    assert answer.status_code == 200
    assert answer.json()["results"] == []


@pytest.mark.django_db
def test_a_csv_download_with_an_unknown_name_is_refused(
    api_as: Any, resources: dict[str, Any]
) -> None:
    answer = api_as("finance").get(API + "budgets/", {"tenant": "nosuch", "format": "csv"})
    assert answer.status_code == 400
    assert "No tenant named nosuch." in answer.content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_client_says_the_queue_is_unknown(
    live_server: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gpupool status --queue nosuch`` says the queue is unknown (exit 1), not "no
    workloads"; ``gpupool nodes --flavor nosuch`` the flavor."""
    cache.clear()
    lead = user("lena")
    nlp = tenant("nlp", lead=lead, namespaces=("nlp",))
    queue("nlp-train", tenant=nlp)
    flavor("h100")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("GPUPOOL_URL", live_server.url)
    monkeypatch.setenv("GPUPOOL_TOKEN", do_issue_token(lead).key)
    for argv, said in (
        (["status", "--queue", "nosuch"], "No queue named nosuch."),
        (["nodes", "--flavor", "nosuch"], "No flavor named nosuch."),
    ):
        out, err = io.StringIO(), io.StringIO()
        assert main(argv, out=out, err=err) == 1
        assert said in err.getvalue()
        assert out.getvalue() == ""
    out, err = io.StringIO(), io.StringIO()
    assert main(["status", "--queue", "nlp-train"], out=out, err=err) == 0, err.getvalue()
