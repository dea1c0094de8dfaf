"""``gpupool nodes drain NAME`` and ``gpupool nodes end-drain NAME`` against a live test
server: an admin drains a node and ends the drain through the nodes API (the actions the
Cluster page calls); anyone else is refused with the server's word, and exit status 1."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from domain_builders import flavor, node, tenant, user

from gpupool.api.actions import do_issue_token
from gpupool.audit.models import AuditEvent
from gpupool.client.main import main
from gpupool.inventory.models import Node

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pool(live_client: Any) -> dict[str, str]:
    """h100 node n1, ready; tokens of ada (an admin) and max (a member of tenant nlp)."""
    node("n1", flavor("h100"), gpus=8)
    member = user("max")
    tenant("nlp", lead=user("lena"), members=(member,), namespaces=("nlp",))
    return {
        "admin": do_issue_token(user("ada", admin=True)).key,
        "member": do_issue_token(member).key,
    }


def run(token: str, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str, str]:
    """The client's exit status, standard output and standard error, with ``token``."""
    monkeypatch.setenv("GPUPOOL_TOKEN", token)
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def test_an_admin_drains_a_node_and_ends_the_drain(
    pool: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, err = run(pool["admin"], monkeypatch, "nodes", "drain", "n1", "--reason", "fw")
    assert status == 0, err
    assert out.startswith("n1 is draining (asked ") and "evicts its workloads" in out
    assert Node.objects.get(name="n1").state == "draining"
    assert AuditEvent.objects.get(action="inventory.drain_node").reason == "fw"

    status, out, err = run(pool["admin"], monkeypatch, "nodes", "end-drain", "n1")
    assert status == 0, err
    assert out == "n1's drain is ended: uncordoned, back in service; nothing more is evicted.\n"
    assert Node.objects.get(name="n1").state == "ready"


def test_drain_json_is_the_apis_node(pool: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    status, out, _ = run(pool["admin"], monkeypatch, "nodes", "drain", "n1", "--json")
    assert status == 0
    answer = json.loads(out)
    assert (answer["name"], answer["state"], answer["cordoned"]) == ("n1", "draining", True)


def test_a_member_is_refused_and_nothing_changes(
    pool: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, err = run(pool["member"], monkeypatch, "nodes", "drain", "n1")
    assert (status, out) == (1, "")
    assert err == "gpupool: Your role does not allow this.\n"
    assert Node.objects.get(name="n1").state == "ready"


def test_an_unknown_node_is_the_servers_404(
    pool: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, err = run(pool["admin"], monkeypatch, "nodes", "drain", "nope")
    assert (status, out) == (1, "")
    assert err.startswith("gpupool: ") and "not found" in err.lower()


def test_drain_without_a_name_is_a_usage_error(
    pool: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, _ = run(pool["admin"], monkeypatch, "nodes", "drain")
    assert (status, out) == (2, "")
    assert Node.objects.get(name="n1").state == "ready"
