"""A duration flag given a negative value (``--expected-runtime -2h``, or ``=-2h``) is a usage
error saying what is wrong with the duration and naming the flag (not argparse's "expected one
argument"); an expected runtime past the API's bound is one too, found before any call."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from gpupool.client.main import main, parser


@pytest.fixture(autouse=True)
def nowhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A server that answers nothing: bad input must be refused before any call."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("GPUPOOL_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("GPUPOOL_TOKEN", "t")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


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
