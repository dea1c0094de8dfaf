"""``gpupool submit`` (and ``dry-run``) print a refusal of the body as a whole as its sentence
alone, as the API's message says it, and a refusal of a nested object as a whole naming that
object (``pod_sets.0: ...``); they printed the API's key, "non_field_errors: ...", which no
user wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from client_cli import run
from rest_framework.test import APIClient

from gpupool.api import errors
from gpupool.client import http

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_clients_word_for_no_field_is_the_apis() -> None:
    assert http.NON_FIELD == errors.NON_FIELD


@pytest.mark.parametrize("command", ["submit", "dry-run"])
def test_a_pod_set_refused_as_a_whole_is_named_without_the_apis_key(
    lena: Any, tmp_path: Path, command: str
) -> None:
    workload = tmp_path / "workload.yaml"
    workload.write_text("name: x\nqueue: nope\npod_sets: [1]\n")
    status, out, err = run(command, str(workload))
    assert (status, out) == (1, "")
    assert "non_field_errors" not in err
    assert "pod_sets.0: Invalid data. Expected a dictionary, but got int.\n" in err


def test_a_body_refused_as_a_whole_is_its_sentence_alone(lena: Any) -> None:
    """The API's own answer to a body refused as a whole, read as the client reads it."""
    api = APIClient()
    api.force_authenticate(lena)
    answer = api.post("/api/v1/workloads/", [1], format="json")
    assert answer.status_code == 400
    error = http._message(400, json.dumps(answer.json()).encode())
    assert list(error.fields) == [errors.NON_FIELD]
    lines = http.field_lines(error.fields, str)
    assert lines == " ".join(error.fields[errors.NON_FIELD])
    assert lines == str(error)  # as the API's message says it
