"""Bad option values are refused by name before any replay starts."""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gpupool.cli.arguments import (
    non_negative_float,
    output_file,
    parse_seeds,
    positive_float,
    positive_int,
)


@pytest.mark.parametrize(
    ("text", "seeds"), [("42", [42]), ("42-44", [42, 43, 44]), ("1, 5,7", [1, 5, 7])]
)
def test_seeds_are_read_as_numbers_ranges_and_lists(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (parse_seeds, "5-2", "empty range '5-2'"),
        (parse_seeds, ",", "none given"),
        (parse_seeds, "4x", "not a whole number: '4x'"),
        (positive_int, "0", "must be at least 1, got 0"),
        (positive_int, "-5", "must be at least 1, got -5"),
        (positive_int, "2.5", "not a whole number: '2.5'"),
        (positive_float, "0", "must be above 0, got 0"),
        (positive_float, "-1.5", "must be above 0, got -1.5"),
        (positive_float, "nan", "not a finite number: 'nan'"),
        (positive_float, "inf", "not a finite number: 'inf'"),
        (positive_float, "soon", "not a number: 'soon'"),
        (non_negative_float, "-1", "must be 0 or more, got -1"),
    ],
)
def test_bad_values_say_what_is_wrong(
    parse: Callable[[str], object], text: str, message: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message.replace(".", r"\.")):
        parse(text)


def test_good_values_are_accepted() -> None:
    assert positive_int(" 7 ") == 7
    assert positive_float("0.5") == 0.5
    assert non_negative_float("0") == 0.0


def test_a_report_file_needs_an_existing_writable_folder(tmp_path: Path) -> None:
    assert output_file(str(tmp_path / "out.html")) == tmp_path / "out.html"
    with pytest.raises(argparse.ArgumentTypeError, match="does not exist"):
        output_file(str(tmp_path / "missing" / "out.html"))
    with pytest.raises(argparse.ArgumentTypeError, match="is a folder"):
        output_file(str(tmp_path))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["openb", "--limit", "-5"], "argument --limit: must be at least 1, got -5"),
        (["openb", "--seeds", "9-1"], "argument --seeds: seeds: empty range '9-1'"),
        (["philly", "--days", "0"], "argument --days: must be above 0, got 0"),
        (["philly", "--starvation-limit", "-60"], "argument --starvation-limit: must be above 0"),
        (["synthetic", "--protected-runtime", "-1"], "argument --protected-runtime: must be 0"),
        (["whatif", "--limit", "0"], "argument --limit: must be at least 1, got 0"),
        (["whatif", "--days", "-3"], "argument --days: must be above 0, got -3"),
    ],
)
def test_simulate_refuses_bad_values_by_option(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("gpupool", "simulate", *args, stdout=io.StringIO())


def test_report_into_a_missing_folder_is_refused_before_the_run(tmp_path: Path) -> None:
    """Not after minutes of replay, with a traceback: before anything runs."""
    target = tmp_path / "missing" / "b2.html"
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"argument --report: folder .*missing does not exist"):
        call_command(
            "gpupool", "simulate", "openb", "--limit", "50", "--report", str(target), stdout=out
        )
    assert out.getvalue() == ""
    assert not target.parent.exists()


def test_bench_refuses_zero_runs() -> None:
    with pytest.raises(CommandError, match="argument --runs: must be at least 1, got 0"):
        call_command("gpupool", "bench", "cycle", "--runs", "0", stdout=io.StringIO())
