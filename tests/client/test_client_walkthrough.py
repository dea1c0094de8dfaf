"""What a walk through the command-line client found, against a stand-in server (standard
library; the client needs no Django) that pages its lists as the API does: lists read past
1,000 rows up to a cap that is said out loud, ``-`` for standard input, an empty workload file
said in words, and one pluralisation for the client's texts."""

from __future__ import annotations

import io
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from client_cli import NOWHERE, run

from gpupool.client import http

WORKLOAD = {
    "queue": "nlp-train",
    "state": "succeeded",
    "gpus": "1.000",
    "queue_position": None,
    "estimated_start_at": None,
    "pending_reason": None,
}
NODE = {"flavor": "h100", "state": "ready", "gpus": [{"index": 0}], "healthy_gpus": 1, "health": []}
NOT_FOUND = {"error": {"status": 404, "code": "not_found", "message": "Not found."}}
STORY = {
    "namespace": "nlp",
    "name": "one",
    "state": "running",
    "queue": "nlp-train",
    "tenant": "nlp",
    "gpus": "1.000",
    "priority_class": "normal",
    "explanation": {"summary": "Running on n1.", "never_fits": False},
    "lost_gpu_hours": "1.000",
    "preemptions": [
        {
            "at": "2026-12-06T10:00:00Z",
            "reason": "preempted",
            "preemptor_queue": None,
            "gpus_freed": "1.000",
            "lost_gpu_hours": "1.000",
        }
    ],
    "timeline": [],
}


class StandIn(BaseHTTPRequestHandler):
    """``workloads/`` and ``nodes/`` list ``rows`` rows, paged by ``page`` and ``page_size``
    (at most 1,000, as the API); ``workloads/nlp/one/`` is ``STORY``; a POST to
    ``workloads/`` or ``workloads/dry-run/`` is kept in ``posted`` and answered; anything
    else is the API's 404."""

    rows = 0
    asked: list[dict[str, str]]
    posted: list[Any]

    def answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        if url.path in ("/api/v1/workloads/", "/api/v1/nodes/"):
            self.asked.append(query)
            page, size = int(query.get("page", 1)), int(query.get("page_size", 100))
            if size > 1000:
                self.answer(400, {"error": {"status": 400, "code": "invalid", "message": "x"}})
                return
            start = (page - 1) * size
            numbers = range(start, min(start + size, self.rows))
            if url.path == "/api/v1/nodes/":
                results = [NODE | {"name": f"n{i:05d}"} for i in numbers]
            else:
                results = [WORKLOAD | {"namespace": "nlp", "name": f"w{i:05d}"} for i in numbers]
            more = start + size < self.rows
            following = f"{url.path}?page={page + 1}" if more else None
            self.answer(200, {"count": self.rows, "next": following, "results": results})
        elif url.path == "/api/v1/workloads/nlp/one/":
            self.answer(200, STORY)
        elif url.path in ("/api/v1/workloads/nlp/proxy/", "/api/v1/workloads/nlp/html/"):
            page = b"<html>Bad Gateway</html>"  # a proxy's page, not the API's JSON
            self.send_response(502 if url.path.endswith("proxy/") else 200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
        else:
            self.answer(404, NOT_FOUND)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.posted.append(body)
        if self.path == "/api/v1/workloads/dry-run/":
            layers = [{"layer": "quota", "passes": True, "detail": "fits"}]
            self.answer(
                200,
                {
                    "cycle_id": None,
                    "snapshot_at": "2026-12-06T10:00:00Z",
                    "layers": layers,
                    "fits": True,
                    "first_failure": None,
                },
            )
        elif self.path == "/api/v1/workloads/":
            self.answer(201, STORY | {"name": body["name"], "state": "pending"})
        else:
            self.answer(404, NOT_FOUND)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type[StandIn]]:
    """The stand-in server, the client pointed at it with a token; the handler's class, whose
    ``rows`` a test sets and whose ``asked`` and ``posted`` it reads."""
    handler = type("Handler", (StandIn,), {"rows": 0, "asked": [], "posted": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("GPUPOOL_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("GPUPOOL_TOKEN", "t0ken")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    yield handler
    server.shutdown()
    server.server_close()


# ----------------------------------------------------------------------------- lists past 1,000


def test_status_all_json_lists_every_row_past_1000(stand_in: type[StandIn]) -> None:
    """It was cut at 1,000 rows without a word while the API said ``"count": 1334``."""
    stand_in.rows = 1334
    status, out, err = run("status", "--all", "--json")
    assert (status, err) == (0, "")
    rows = json.loads(out)
    assert len(rows) == 1334
    assert rows[-1]["name"] == "w01333"
    assert all(int(query["page_size"]) <= 1000 for query in stand_in.asked)


def test_status_table_lists_every_row_past_1000(stand_in: type[StandIn]) -> None:
    stand_in.rows = 1334
    status, out, err = run("status", "--all")
    assert (status, err) == (0, "")
    assert sum(line.startswith("nlp/w") for line in out.splitlines()) == 1334


def test_nodes_lists_every_row_past_1000(stand_in: type[StandIn]) -> None:
    stand_in.rows = 1200
    status, out, err = run("nodes", "--json")
    assert (status, err) == (0, "")
    assert len(json.loads(out)) == 1200


def test_a_list_past_the_cap_says_how_many_of_how_many_and_how_to_narrow(
    stand_in: type[StandIn], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http, "MAX_ROWS", 600)
    monkeypatch.setattr(http, "PAGE_SIZE", 250)
    stand_in.rows = 1334
    status, out, err = run("status", "--all")
    assert status == 0
    assert sum(line.startswith("nlp/w") for line in out.splitlines()) == 600
    assert err == (
        "gpupool: showing the first 600 of 1,334 workloads, the most the client reads; "
        "narrow the list with --state, --queue or --namespace, or leave out --all.\n"
    )
    assert [query["page"] for query in stand_in.asked] == ["1", "2", "3"]  # no more read
    status, out, err = run("nodes", "--flavor", "h100")
    assert status == 0
    assert err == (
        "gpupool: showing the first 600 of 1,334 nodes, the most the client reads; "
        "narrow the list with --flavor, --state or --unhealthy.\n"
    )


def test_with_json_the_cap_warning_is_json_on_stderr_and_stdout_stays_the_rows(
    stand_in: type[StandIn], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http, "MAX_ROWS", 600)
    stand_in.rows = 1334
    status, out, err = run("--json", "status", "--state", "pending")
    assert status == 0
    assert len(json.loads(out)) == 600
    warning = json.loads(err)["warning"]
    assert (warning["code"], warning["shown"], warning["count"]) == ("truncated", 600, 1334)
    assert warning["message"].endswith("narrow the list with --state, --queue or --namespace")


def test_a_list_of_exactly_the_cap_has_no_warning(
    stand_in: type[StandIn], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http, "MAX_ROWS", 600)
    monkeypatch.setattr(http, "PAGE_SIZE", 200)
    stand_in.rows = 600
    status, out, err = run("nodes", "--json")
    assert (status, err, len(json.loads(out))) == (0, "", 600)


# ----------------------------------------------------------------------------- errors as JSON


def test_with_json_an_api_error_is_the_apis_error_body_on_stderr(
    stand_in: type[StandIn],
) -> None:
    status, out, err = run("--json", "why", "nlp/missing")
    assert (status, out) == (1, "")
    assert json.loads(err) == NOT_FOUND
    status, out, err = run("why", "nlp/missing")  # without --json: the words, as before
    assert (status, err) == (
        1,
        "gpupool: Not found: no workload nlp/missing among those you may see.\n",
    )


def test_an_answer_that_is_not_the_apis_json_is_an_error_in_its_shape(
    stand_in: type[StandIn],
) -> None:
    """A 200 that was no JSON was a JSONDecodeError traceback."""
    status, out, err = run("--json", "why", "nlp/proxy")
    assert (status, out) == (1, "")
    assert json.loads(err) == {
        "error": {
            "status": 502,
            "code": "error",
            "message": "HTTP 502: <html>Bad Gateway</html>",
        }
    }
    status, out, err = run("why", "nlp/html")
    assert (status, out) == (1, "")
    assert err == "gpupool: HTTP 200: the answer is not JSON: <html>Bad Gateway</html>\n"


def test_with_json_a_usage_error_is_json_and_exits_2(
    stand_in: type[StandIn], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, out, err = run("why", "no-slash", "--json")  # argparse's own error
    assert (status, out) == (2, "")
    error = json.loads(err)["error"]
    assert (error["status"], error["code"]) == (None, "usage")
    assert "'no-slash' is not NAMESPACE/NAME" in error["message"]
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    status, _, err = run("--json", "dry-run", str(empty))
    assert status == 2 and json.loads(err)["error"]["code"] == "usage"
    monkeypatch.delenv("GPUPOOL_TOKEN")
    status, _, err = run("--json", "status")
    assert status == 2 and "gpupool login" in json.loads(err)["error"]["message"]


def test_with_json_an_unreachable_server_is_json_and_exits_1(
    nowhere: None,
) -> None:
    status, out, err = run("nodes", "--json")
    assert (status, out) == (1, "")
    error = json.loads(err)["error"]
    assert (error["status"], error["code"]) == (None, "unreachable")
    assert error["message"].startswith(f"cannot reach {NOWHERE}")


# ----------------------------------------------------------------------------- - is stdin


@pytest.mark.parametrize("verb", ["dry-run", "submit"])
def test_a_dash_reads_the_workload_from_standard_input(
    stand_in: type[StandIn], monkeypatch: pytest.MonkeyPatch, verb: str
) -> None:
    """It was "cannot read -: No such file or directory"."""
    monkeypatch.setattr(
        "sys.stdin", io.StringIO("name: one\nqueue: nlp-train\npod_sets: [{gpus: 1}]\n")
    )
    status, _, err = run(verb, "-", "--image", "pytorch:24")
    assert status == 0, err
    assert stand_in.posted == [
        {
            "name": "one",
            "queue": "nlp-train",
            "pod_sets": [{"gpus": 1, "image": "pytorch:24"}],
        }
    ]


def test_an_empty_standard_input_says_so(
    stand_in: type[StandIn], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    status, _, err = run("dry-run", "-")
    assert status == 2
    assert err == (
        "gpupool: standard input is empty: "
        "expected a YAML or JSON object with name, queue and pod_sets\n"
    )
    assert stand_in.posted == []


# ----------------------------------------------------------------------------- empty files


@pytest.mark.parametrize(
    "text", ["", "\n", "# only a comment\n"], ids=["empty", "blank", "comment"]
)
def test_an_empty_workload_file_is_said_in_words(
    stand_in: type[StandIn], tmp_path: Path, text: str
) -> None:
    """It was "... must hold one workload (a mapping), not NoneType"."""
    job = tmp_path / "job.yaml"
    job.write_text(text)
    status, out, err = run("submit", str(job))
    assert (status, out) == (2, "")
    assert err == (
        f"gpupool: {job} is empty: expected a YAML or JSON object with name, queue and pod_sets\n"
    )
    assert stand_in.posted == []


def test_a_workload_file_holding_a_list_is_said_in_words(
    stand_in: type[StandIn], tmp_path: Path
) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("- name: one\n")
    status, _, err = run("dry-run", str(job))
    assert status == 2
    assert err == (
        f"gpupool: {job} must hold one workload, a YAML or JSON object with name, queue and "
        "pod_sets; it holds a list\n"
    )
    assert "list" in err and "NoneType" not in err


# ----------------------------------------------------------------------------- one plural


def test_one_gpu_is_one_gpu_in_the_clients_texts(stand_in: type[StandIn]) -> None:
    """It was "1 GPUs", "1 GPU-hours"."""
    status, out, err = run("why", "nlp/one")
    assert status == 0, err
    assert "nlp/one: running in queue nlp-train (tenant nlp), 1 GPU, class normal" in out
    assert "Preempted 1 time, 1 GPU-hour of progress lost:" in out
    assert "preempted; 1 GPU freed, 1 GPU-hour lost" in out
    status, out, err = run("submit", "--name", "one", "--queue", "nlp-train", "--gpus", "1")
    assert status == 0, err
    assert "Submitted nlp/one to queue nlp-train (1 GPU, class normal)." in out
    assert "GPUs" not in out


def test_counted_writes_the_noun_singular_for_exactly_one() -> None:
    from gpupool.client.main import counted

    assert counted("1.000", "GPU") == "1 GPU"
    assert counted("4.000", "GPU") == "4 GPUs"
    assert counted("0.500", "GPU") == "0.5 GPUs"
    assert counted(0, "time") == "0 times"
    assert counted(1, "time") == "1 time"
    assert counted("1.5", "GPU-hour") == "1.5 GPU-hours"
    assert counted(2, "person", "people") == "2 people"


def test_hours_are_counted_to_the_hundredth_as_the_pages_write_them() -> None:
    """``gpupool why`` said "9.0967 GPU-hours" lost where the workload's page says 9.1 GPU-h
    (``number_formats.GPU_HOURS_PLACES``); thousands separated as there."""
    from gpupool.client.main import hours_counted, lost_in_units

    assert hours_counted("9.0967", "GPU-hour") == "9.1 GPU-hours"
    assert hours_counted("1234.5678", "GPU-hour") == "1,234.57 GPU-hours"
    assert hours_counted("1.0000", "GPU-hour") == "1 GPU-hour"
    events = [
        {"lost_gpu_hours": "2.0044", "unit": "GPU"},
        {"lost_gpu_hours": "0.126", "unit": "MIG instance"},
    ]
    assert lost_in_units("2.1304", events) == "2 GPU-hours and 0.13 MIG instance-hours"
    assert lost_in_units("9.0967", [{"lost_gpu_hours": "9.0967", "unit": "GPU"}]) == "9.1 GPU-hours"
