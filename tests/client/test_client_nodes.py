"""``gpupool nodes`` against a live test server: the pool's nodes with their flavor, state in
one word (the API's ``state``, ``Node.state``), healthy GPUs of all and the reasons why not
all, filtered by the API's own filters and paged through the API like ``gpupool status``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from client_cli import run
from domain_builders import flavor, node, tenant, user

from gpupool.client import http
from gpupool.inventory.models import Node

pytestmark = pytest.mark.django_db(transaction=True)

AT = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


@pytest.fixture
def pool(live_client: Any) -> None:
    """h100 nodes n1 (ready, GPU 3 broken), n2 (draining) and n3 (gone), a100 node a1
    (cordoned); max, a member of tenant nlp, is logged in (every role reads the nodes)."""
    h100, a100 = flavor("h100"), flavor("a100")
    node("n1", h100, gpus=8, unhealthy_gpus={3: "XID 79"})
    node("n2", h100, gpus=8)
    node("n3", h100, gpus=4)
    node("a1", a100, gpus=4)
    Node.objects.filter(name="n2").update(cordoned=True, drain_requested_at=AT)
    Node.objects.filter(name="n3").update(gone_at=AT)
    Node.objects.filter(name="a1").update(cordoned=True)
    member = user("max")
    tenant("nlp", lead=user("lena"), members=(member,), namespaces=("nlp",))
    live_client(member)


def test_nodes_lists_each_nodes_flavor_state_gpus_and_reasons(pool: None) -> None:
    status, out, err = run("nodes")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["NODE", "FLAVOR", "STATE", "HEALTHY", "GPUS", "REASONS"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert list(rows) == ["a1", "n1", "n2", "n3"]
    assert rows["n1"].split()[:4] == ["n1", "h100", "ready", "7/8"]
    assert rows["n1"].endswith("gpu 3: XID 79")
    assert rows["n2"].split()[:4] == ["n2", "h100", "draining", "8/8"]
    # (cordoned here without the audit log: the API's note says so, as the client does)
    unrecorded = "cordoned by gpupool; the audit log does not say by whom or why"
    assert rows["n2"].endswith(f"draining: its workloads are being evicted; {unrecorded}")
    assert rows["n3"].split()[:3] == ["n3", "h100", "gone"]
    assert rows["a1"].split()[:4] == ["a1", "a100", "cordoned", "4/4"]
    assert rows["a1"].endswith(f"cordoned: no new placements; {unrecorded}")
    assert all(line == line.rstrip() for line in lines)  # no padding after the reasons


def test_nodes_filters_by_the_apis_flavor_state_and_health(pool: None) -> None:
    def listed(*flags: str) -> list[str]:
        status, out, err = run("nodes", *flags)
        assert status == 0, err
        return [line.split()[0] for line in out.splitlines()[1:]]

    assert listed("--flavor", "h100") == ["n1", "n2", "n3"]
    assert listed("--state", "cordoned") == ["a1"]
    assert listed("--state", "draining", "--state", "gone") == ["n2", "n3"]
    assert listed("--flavor", "h100", "--state", "cordoned") == []
    assert listed("--unhealthy") == ["n1"]
    status, out, _ = run("nodes", "--flavor", "a100", "--state", "ready")
    assert (status, out) == (0, "No nodes.\n")


def test_nodes_json_is_the_apis_rows(pool: None) -> None:
    status, out, _ = run("--json", "nodes", "--state", "draining")
    assert status == 0
    [n2] = json.loads(out)
    assert (n2["name"], n2["state"], n2["healthy_gpus"]) == ("n2", "draining", 8)
    assert n2["health"] == ["draining: its workloads are being evicted"]


@pytest.mark.parametrize("where", ["before", "after"])
def test_json_may_follow_the_command_as_the_docs_write_it(pool: None, where: str) -> None:
    """`gpupool nodes --json` (docs/api.md) was a usage error: only `gpupool --json nodes`."""
    args = ["--json", "nodes"] if where == "before" else ["nodes", "--json"]
    status, out, _ = run(*args, "--state", "draining")
    assert status == 0 and [n["name"] for n in json.loads(out)] == ["n2"]
    status, out, _ = run("status", "--json") if where == "after" else run("--json", "status")
    assert status == 0 and isinstance(json.loads(out), list | dict)


def test_nodes_pages_through_the_api(pool: None, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[dict[str, Any]] = []
    call = http.Api.call

    def small_pages(self: http.Api, method: str, path: str, **kwargs: Any) -> Any:
        query = kwargs.get("query") or {}
        if "page_size" in query:
            query = {**query, "page_size": 1}
            asked.append(query)
        return call(self, method, path, **{**kwargs, "query": query})

    monkeypatch.setattr(http.Api, "call", small_pages)
    status, out, _ = run("nodes")
    assert status == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["a1", "n1", "n2", "n3"]
    assert [query["page"] for query in asked] == [1, 2, 3, 4]


def test_a_state_that_is_none_is_refused_naming_it(
    pool: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # refused before any request, as bad input (exit 2, argparse's usage error on stderr),
    # naming the option and the states
    status, out, _ = run("nodes", "--state", "broken")
    err = capsys.readouterr().err
    assert (status, out) == (2, "")
    assert "--state" in err and "broken" in err and "draining" in err


def test_nodes_without_a_token_says_how_to_log_in(
    pool: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPOOL_TOKEN")
    status, _, err = run("nodes")
    assert status == 2 and "gpupool login" in err
