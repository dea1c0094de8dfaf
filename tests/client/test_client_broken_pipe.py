"""``gpupool status | head -1``: a reader that stops reading early ends the client quietly,
as it does a Unix tool (exit 141, what a shell reports for a tool SIGPIPE stopped), instead of
a ``BrokenPipeError`` traceback on standard error. The client runs as a process of its own
against a stand-in server (standard library; the client needs no Django) that lists more
nodes than a pipe holds."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gpupool.client.main import EXIT_BROKEN_PIPE, main

NODES = 1000  # a line of each is ~250 bytes: 4x what a pipe holds
NODE = {
    "flavor": "h100",
    "state": "cordoned",
    "gpus": [{"index": i} for i in range(8)],
    "healthy_gpus": 8,
    "health": ["cordoned: " + "no new placements " * 12],
}


class NodeList(BaseHTTPRequestHandler):
    """``GET /api/v1/nodes/``: one page of every node; anything else 404."""

    def do_GET(self) -> None:
        if not self.path.startswith("/api/v1/nodes/"):
            self.send_error(404)
            return
        rows = [NODE | {"name": f"n{index:04d}"} for index in range(NODES)]
        body = json.dumps({"count": NODES, "next": None, "results": rows}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def stand_in() -> Iterator[str]:
    """The stand-in server's address."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), NodeList)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def client_env(url: str, tmp_path: Path) -> dict[str, str]:
    """The client's environment: the stand-in server, a token, its own config folder."""
    return {
        "PATH": "/usr/bin:/bin",
        "GPUPOOL_URL": url,
        "GPUPOOL_TOKEN": "t0ken",
        "XDG_CONFIG_HOME": str(tmp_path),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }


def client_read_one_line(url: str, tmp_path: Path, *argv: str) -> tuple[str, int, str]:
    """Run ``gpupool ARGV`` as its own process, read its first line and close the pipe, as
    ``| head -1`` does; the line, the exit status and standard error."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gpupool.client.main", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=client_env(url, tmp_path),
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline().decode()
    process.stdout.close()
    error = process.stderr.read().decode()
    return first, process.wait(timeout=60), error


@pytest.mark.parametrize("argv", [("nodes",), ("nodes", "--json")], ids=["table", "json"])
def test_output_piped_to_head_ends_quietly(
    stand_in: str, tmp_path: Path, argv: tuple[str, ...]
) -> None:
    first, status, error = client_read_one_line(stand_in, tmp_path, *argv)
    assert first.startswith("NODE") or first.startswith("[")
    assert error == ""  # was: Traceback ... BrokenPipeError: [Errno 32] Broken pipe
    assert status == EXIT_BROKEN_PIPE == 141


def test_the_whole_output_read_still_exits_0(stand_in: str, tmp_path: Path) -> None:
    process = subprocess.run(
        [sys.executable, "-m", "gpupool.client.main", "nodes"],
        capture_output=True,
        env=client_env(stand_in, tmp_path),
        timeout=60,
        check=False,
    )
    assert (process.returncode, process.stderr) == (0, b"")
    assert len(process.stdout.splitlines()) == NODES + 1


class ClosedPipe(io.StringIO):
    """An output whose reader went away: every write fails as a closed pipe's does."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_main_answers_141_for_an_output_that_is_no_file(
    stand_in: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUPOOL_URL", stand_in)
    monkeypatch.setenv("GPUPOOL_TOKEN", "t0ken")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    err = io.StringIO()
    assert main(["nodes"], out=ClosedPipe(), err=err) == 141
    assert err.getvalue() == ""
