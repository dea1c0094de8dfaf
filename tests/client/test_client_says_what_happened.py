"""The client's words match what happened: ``requests --kind`` takes the API's word for a kind
(``queue-quota``, also what ``request quota`` files) and lists kinds in it; a dry-run that could
never run says so once; ``nodes end-drain`` says whether a drain was ended (and whether the
node is back in service) or there was none to end."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from domain_builders import flavor, node, priority_class, queue, quota, tenant, user

from gpupool.api.actions import do_issue_token
from gpupool.client.main import main
from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.inventory.actions import do_drain_node
from gpupool.inventory.models import Node
from gpupool.quotas.actions import do_create_quota_request

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pool(live_client: Any) -> dict[str, Any]:
    """Two 8-GPU h100 nodes (each its own NVLink domain); lena leads nlp (queue nlp-train,
    capability 16) and filed a quota request for it; ada is an admin."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    node("n2", h100, gpus=8)
    priority_class("normal", default=True)
    lena = user("lena")
    nlp = tenant("nlp", lead=lena, namespaces=("nlp",))
    train = queue("nlp-train", parent=queue("root"), tenant=nlp)
    quota(train, h100, 0, 8, 16)
    do_create_quota_request(
        kind="queue-quota",
        tenant=nlp,
        requested_by=lena,
        justification="a bigger model",
        payload={"guarantee": 0, "deserved": 8, "capability": 12},
        queue=train,
        flavor=h100,
        submit=True,
    )
    now = timezone.now()
    do_finish_cycle(do_start_cycle(at=now - timedelta(seconds=1)), at=now, status="succeeded")
    return {"lena": do_issue_token(lena).key, "ada": do_issue_token(user("ada", admin=True)).key}


def run(token: str, monkeypatch: pytest.MonkeyPatch, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv("GPUPOOL_TOKEN", token)
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("word", ["queue-quota"])
def test_requests_kind_takes_the_clients_word_and_lists_kinds_in_it(
    pool: dict[str, Any], monkeypatch: pytest.MonkeyPatch, word: str
) -> None:
    status, out, err = run(pool["lena"], monkeypatch, "requests", "--kind", word)
    assert status == 0, err
    _, row = out.splitlines()
    assert row.split()[1:4] == ["queue-quota", "submitted", "nlp"]
    status, out, err = run(pool["lena"], monkeypatch, "requests", "--kind", "budget")
    assert (status, out) == (0, "No requests.\n")
    status, out, err = run(pool["lena"], monkeypatch, "--json", "requests", "--kind", word)
    assert [r["kind"] for r in json.loads(out)] == ["queue-quota"]  # the API's own word


def test_a_dry_run_that_could_never_run_says_so_once(
    pool: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ("dry-run", "--queue", "nlp-train", "--image", "pytorch", "--flavor", "h100")
    gang = ("--count", "2", "--gpus", "8", "--topology", "domain")
    status, out, err = run(pool["lena"], monkeypatch, *argv, *gang)
    assert status == 3, err
    assert "It could never run as asked: it must sit in one NVLink domain" in out
    assert out.count("never run as asked") == 1


def test_end_drain_says_the_drain_ended_and_the_node_is_back(
    pool: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    do_drain_node(Node.objects.get(name="n1"), acting_user=None)
    status, out, err = run(pool["ada"], monkeypatch, "nodes", "end-drain", "n1")
    assert status == 0, err
    assert out == "n1's drain is ended: uncordoned, back in service; nothing more is evicted.\n"
    assert Node.objects.get(name="n1").state == "ready"


def test_end_drain_of_a_node_excluded_by_the_cluster_says_it_takes_nothing_yet(
    pool: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    do_drain_node(Node.objects.get(name="n1"), acting_user=None)
    Node.objects.filter(name="n1").update(cluster_exclusion="not Ready")
    assert Node.objects.get(name="n1").state == "draining"
    status, out, err = run(pool["ada"], monkeypatch, "nodes", "end-drain", "n1")
    assert status == 0, err
    assert out == (
        "n1's drain is ended: uncordoned, nothing more is evicted; but it is excluded: the "
        "cluster takes no pods there (not Ready), as the control loop's last sync saw it; it "
        "takes placements from the first sync after the cluster does again.\n"
    )


def test_end_drain_of_a_node_not_draining_says_there_was_nothing_to_end(
    pool: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, err = run(pool["ada"], monkeypatch, "nodes", "end-drain", "n2")
    assert status == 0, err
    assert out == "n2 was not draining: no drain to end, nothing changed; it is ready.\n"
