"""``gpupool --json`` against a live test server: a refusal is the API's own error body, one
line of JSON on standard error, with the exit status of the words (1); standard output stays
empty, so a tool reads the one or the other."""

from __future__ import annotations

import json

import pytest
from client_cli import run

pytestmark = pytest.mark.django_db(transaction=True)


def test_with_json_a_refused_submission_is_the_apis_error_body(lena: None) -> None:
    status, out, err = run(
        "--json", "submit", "--name", "x", "--queue", "nope", "--gpus", "1", "--image", "i"
    )
    assert (status, out) == (1, "")
    assert err.count("\n") == 1  # one line
    error = json.loads(err)["error"]
    assert (error["status"], error["code"]) == (400, "invalid")
    assert "queue" in error["fields"]


def test_with_json_a_missing_workload_is_the_apis_404_body(lena: None) -> None:
    status, out, err = run("why", "nlp/missing", "--json")
    assert (status, out) == (1, "")
    assert json.loads(err) == {
        "error": {"status": 404, "code": "not_found", "message": "Not found."}
    }
