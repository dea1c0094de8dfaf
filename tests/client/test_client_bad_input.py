"""Bad input to the client is a usage error (exit 2) found before any call to the server:
workload files that are not bounded YAML, and state words the API does not know."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from client_cli import run

from gpupool.client.main import MAX_FILE_BYTES, NODE_STATES, WORKLOAD_STATES
from gpupool.inventory.choices import NodeState
from gpupool.workloads.choices import WorkloadState

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(9)
)


pytestmark = pytest.mark.usefixtures("nowhere")  # bad input is refused before any call


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("a: &a [*a]\n", "alias"),
        (BOMB, "alias"),
        ("[" * 3000 + "]" * 3000, "levels deep"),
        ("a: " + "x" * (MAX_FILE_BYTES + 1), "larger than"),
    ],
)
@pytest.mark.parametrize("as_json", [False, True])
def test_a_workload_file_that_is_not_bounded_yaml_is_a_usage_error(
    tmp_path: Path, text: str, said: str, as_json: bool
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(text)
    status, out, err = run(*(["--json"] if as_json else []), "submit", str(path))
    assert status == 2 and out == ""
    assert said in err
    if as_json:
        assert json.loads(err.splitlines()[0])["error"]["code"] == "usage"


@pytest.mark.parametrize("verb", ["status", "nodes"])
def test_a_state_the_api_does_not_know_is_a_usage_error(verb: str, capsys: Any) -> None:
    assert run(verb, "--state", "bogus")[0] == 2
    assert "invalid choice: 'bogus'" in capsys.readouterr().err
    status, _, err = run("--json", verb, "--state", "bogus")
    assert status == 2 and json.loads(err)["error"]["code"] == "usage"


def test_the_client_s_states_are_the_server_s() -> None:
    assert set(WORKLOAD_STATES) == set(WorkloadState.values)
    assert set(NODE_STATES) == set(NodeState.values)
