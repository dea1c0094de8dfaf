"""The command-line client against a live test server: log in, submit, see where the work
stands and why, try it first, cancel it -- and the client needs no Django."""

from __future__ import annotations

import io
import stat
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
from client_cli import run
from django.utils import timezone
from domain_builders import explained, flavor, node, priority_class, queue, quota, tenant, user

from gpupool.api.actions import do_issue_token
from gpupool.client.main import main
from gpupool.control.actions import do_finish_cycle, do_start_cycle
from gpupool.control.models import SchedulingCycle
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def server(live_client: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A pool of two 8-GPU nodes; lena leads tenant nlp (queue nlp-train, deserving 8 GPUs);
    the client talks to the live server and keeps its config under ``tmp_path``."""
    h100 = flavor("h100")
    node("n1", h100, gpus=8)
    node("n2", h100, gpus=8)
    priority_class("normal", default=True)
    lena = user("lena")
    lena.set_password("s3cret-pass")
    lena.save()
    nlp = tenant("nlp", lead=lena, namespaces=("nlp",))
    quota(queue("nlp-train", parent=queue("root"), tenant=nlp), h100, 0, 8, 16)
    now = timezone.now()
    do_finish_cycle(do_start_cycle(at=now - timedelta(seconds=1)), at=now, status="succeeded")
    monkeypatch.delenv("GPUPOOL_TOKEN", raising=False)
    return {"user": lena, "config": tmp_path / "gpupool" / "config"}


@pytest.fixture
def logged_in(server: dict[str, Any], live_client: Any) -> dict[str, Any]:
    """The server's pool, lena logged in."""
    live_client(server["user"])
    return server


def test_the_client_imports_no_django() -> None:
    code = (
        "import sys, gpupool.client.main; "
        "print(','.join(m for m in ('django', 'rest_framework') if m in sys.modules))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert found == ""


def test_login_asks_the_password_and_keeps_the_token_for_its_owner_only(
    server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("getpass.getpass", lambda prompt: "s3cret-pass")
    status, out, err = run("login", "--username", "lena")
    assert status == 0, err
    assert "Logged in to" in out and "as lena" in out
    config = server["config"]
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert do_issue_token(server["user"]).key in config.read_text()
    assert run("status")[0] == 0  # the stored token works
    monkeypatch.setattr("getpass.getpass", lambda prompt: "wrong")
    status, _, err = run("login", "--username", "lena")
    assert status == 1 and "username or password is wrong" in err


def test_without_a_token_the_client_says_how_to_log_in(server: dict[str, Any]) -> None:
    status, _, err = run("status")
    assert status == 2 and "gpupool login" in err


def test_a_user_submits_and_follows_work_from_the_command_line(
    logged_in: dict[str, Any],
) -> None:
    status, out, err = run(
        "submit",
        "--name", "bert", "--queue", "nlp-train", "--image", "pytorch:24",
        "--gpus", "4", "--flavor", "h100", "--env", "EPOCHS=3", "--expected-runtime", "2h",
        "--", "python", "train.py", "--lr", "3e-4",
    )  # fmt: skip
    assert status == 0, err
    assert "Submitted nlp/bert to queue nlp-train (4 GPUs, class normal)." in out
    pod_set = Workload.objects.get(name="bert").pod_sets.get()
    assert pod_set.command == ["python", "train.py", "--lr", "3e-4"]
    assert pod_set.env == {"EPOCHS": "3"}
    Workload.objects.filter(name="bert").update(
        estimated_start_at=timezone.now() + timedelta(hours=1)
    )
    explained(
        Workload.objects.get(name="bert"),
        "quota",
        "Queue nlp-train has 0 h100 GPUs of quota available, 4 asked.",
        {"asked_gpus": 4, "available_gpus": 0},
        queue_rank=7.5,  # the only pending workload a cycle ranked in its queue: position 1
    )
    status, out, _ = run("status")
    assert status == 0
    assert "nlp/bert" in out and "quota" in out and "Last scheduling cycle" in out
    status, out, _ = run("why", "nlp/bert")
    assert status == 0
    assert "Why: Queue nlp-train has 0 h100 GPUs of quota available, 4 asked." in out
    assert "Position: 1 in queue nlp-train" in out
    assert "Estimated start: " in out and "UTC" in out
    status, out, _ = run("cancel", "nlp/bert", "--reason", "typo in the config")
    assert status == 0 and "Cancelled nlp/bert." in out
    assert Workload.objects.get(name="bert").state == "cancelled"
    assert "No workloads." in run("status")[1]


def test_a_dry_run_from_a_file_says_which_layer_stops_it(
    logged_in: dict[str, Any], tmp_path: Any
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        "queue: nlp-train\npod_sets:\n  - {count: 3, gpus: 8, flavor: h100, image: pytorch:24}\n"
    )
    status, out, err = run("dry-run", str(job))
    assert status == 3, err
    assert "quota      FAILS" in out and "16 h100 GPUs of quota available, 24 asked" in out
    # more than its queue's capability: never, not "not now" (as the API and the page say)
    assert "It could never run as asked: Queue nlp-train can never hold 24 h100 GPUs" in out
    assert "would not start now" not in out
    status, out, _ = run("dry-run", str(job), "--count", "1")
    assert status == 0 and "It would start now." in out
    assert not Workload.objects.exists()


def test_a_refused_submission_names_the_field(logged_in: dict[str, Any]) -> None:
    status, _, err = run("submit", "--name", "x", "--queue", "nlp-train", "--gpus", "1")
    assert status == 1
    assert "pod_sets.0.image" in err
    status, _, err = run("why", "nlp/missing")
    assert status == 1 and "Not found" in err
    status, _, err = run("why", "no-slash")
    assert status == 2


def test_a_server_address_that_is_no_url_is_refused_naming_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It was a traceback (urllib's "unknown url type")."""
    out, err = io.StringIO(), io.StringIO()
    assert main(["login", "--url", "notaurl", "--username", "lena"], out=out, err=err) == 2
    assert "--url: 'notaurl' is not a server address" in capsys.readouterr().err


def test_a_bad_gpupool_url_in_the_environment_is_named(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("GPUPOOL_URL", "ftp//nowhere")
    monkeypatch.setenv("GPUPOOL_TOKEN", "t")
    status, _, err = run("status")
    assert status == 2
    assert (
        err
        == "gpupool: GPUPOOL_URL: 'ftp//nowhere' is not a server address like https://gpupool.example.org\n"
    )


def test_login_without_a_username_to_read_says_how_to_give_one(
    server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # at its end: no username to type
    status, _, err = run("login")
    assert status == 2
    assert "no username: give --username, or type it when asked" in err
    assert not server["config"].exists()


def test_an_estimate_the_pool_has_passed_is_due_in_the_list_the_story_and_the_api(
    logged_in: dict[str, Any],
) -> None:
    """Estimates are refreshed about once a minute: one already before the pool's clock (the
    last cycle's cluster time) reads "due now", not as a time still to come; the status line
    gives the pool's clock, which a simulated cluster runs ahead of the wall clock."""
    status, _, err = run(
        "submit", "--name", "late", "--queue", "nlp-train", "--image", "pytorch:24",
        "--gpus", "4", "--flavor", "h100",
    )  # fmt: skip
    assert status == 0, err
    ahead = timezone.now() + timedelta(hours=5)  # the simulated cluster's clock
    cycle = do_start_cycle(at=timezone.now())
    do_finish_cycle(cycle, at=timezone.now(), status="succeeded")
    SchedulingCycle.objects.filter(pk=cycle.pk).update(cluster_at=ahead)  # as a record does
    late = Workload.objects.get(name="late")
    explained(late, "quota", "Queue nlp-train has 0 h100 GPUs of quota available.", queue_rank=1)
    Workload.objects.filter(pk=late.pk).update(estimated_start_at=ahead - timedelta(hours=1))
    status, out, _ = run("status")
    assert status == 0
    assert "due now (" in out and f"Last scheduling cycle: {ahead:%Y-%m-%d %H:%M} UTC" in out
    status, out, _ = run("why", "nlp/late")
    assert "Estimated start: due now (estimated for " in out
    Workload.objects.filter(pk=late.pk).update(estimated_start_at=ahead + timedelta(hours=1))
    status, out, _ = run("why", "nlp/late")
    assert "due now" not in out and "Estimated start: " in out
    status, out, _ = run("status")
    assert "due now" not in out


def test_why_writes_the_facts_numbers_and_flags_as_people_read_them() -> None:
    """``(reason: quota; borrowing_capped=False, asked_gpus=112.0)`` read as Python."""
    from gpupool.client.main import print_story

    out = io.StringIO()
    print_story(
        {
            "namespace": "nlp",
            "name": "big",
            "state": "pending",
            "queue": "nlp-train",
            "tenant": "nlp",
            "gpus": "112.000",
            "priority_class": "normal",
            "explanation": {
                "reason": "quota",
                "detail": "Queue nlp-train has 0 h100 GPUs of quota available, 112 asked.",
                "facts": {"asked_gpus": 112.0, "borrowing_capped": False, "share": 0.47},
                "queue_position": 3,
                "estimated_start_at": None,
                "estimate_not_before": None,
            },
            "timeline": [],
        },
        out,
    )
    assert "(reason: quota; asked_gpus=112, borrowing_capped=no, share=0.47)" in out.getvalue()
