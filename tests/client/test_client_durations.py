"""A duration flag given a negative value (``--expected-runtime -2h``, or ``=-2h``) is a usage
error saying what is wrong with the duration and naming the flag (not argparse's "expected one
argument"); an expected runtime past the API's bound is one too, found before any call."""

from __future__ import annotations

import pytest
from client_cli import run

from gpupool.client.main import parser

pytestmark = pytest.mark.usefixtures("nowhere")  # bad input is refused before any call


@pytest.mark.parametrize("verb", ["submit", "dry-run"])
@pytest.mark.parametrize(
    "flags",
    [
        ("--expected-runtime", "-2h"),
        ("--expected-runtime=-2h",),
        ("--protected-runtime", "-30"),
    ],
)
def test_a_negative_duration_is_a_usage_error_naming_the_flag(
    verb: str, flags: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(verb, "--queue", "nlp-train", *flags)
    err = capsys.readouterr().err
    flag = flags[0].split("=")[0]
    value = flags[-1].split("=")[-1]
    assert status == 2 and out == ""
    assert f"argument {flag}: '{value}' is negative: a duration is 0 or more" in err
    assert "expected one argument" not in err


def test_an_expected_runtime_past_366_days_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run("submit", "--queue", "nlp-train", "--expected-runtime", "100000h")[0] == 2
    assert (
        "argument --expected-runtime: '100000h' is longer than 8784h (366 days)"
        in capsys.readouterr().err
    )


def test_durations_still_parse_and_the_bound_is_the_server_s() -> None:
    from gpupool.client.main import MAX_EXPECTED_RUNTIME_S
    from gpupool.workloads.actions import MAX_EXPECTED_RUNTIME_S as SERVER_MAX_EXPECTED_RUNTIME_S

    options = parser().parse_args(
        ["submit", "--expected-runtime", "8784h", "--protected-runtime", "1h30m"]
    )
    assert (options.expected_runtime, options.protected_runtime) == (MAX_EXPECTED_RUNTIME_S, 5400)
    assert MAX_EXPECTED_RUNTIME_S == SERVER_MAX_EXPECTED_RUNTIME_S
