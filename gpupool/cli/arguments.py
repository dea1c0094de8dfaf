"""Argument types for the ``gpupool`` subcommands: bad values fail before any work starts.

argparse prefixes each message with the option (``argument --limit: must be at least 1,
got -5``), so the messages here say only what is wrong with the value.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import TypeVar

Number = TypeVar("Number", int, float)


def parse_seeds(text: str) -> list[int]:
    """Seeds from ``42``, ``42-51`` or ``42,45,47``."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            low, high = (_int(x) for x in part.split("-", 1))
            if high < low:
                raise argparse.ArgumentTypeError(f"seeds: empty range {part!r}")
            seeds.extend(range(low, high + 1))
        elif part:
            seeds.append(_int(part))
    if not seeds:
        raise argparse.ArgumentTypeError("seeds: none given")
    return seeds


def positive_int(text: str) -> int:
    """A count that must be at least 1 (``--limit``, ``--runs``)."""
    value = _int(text)
    return _checked(value, text, value >= 1, "at least 1")


def positive_float(text: str) -> float:
    """A finite number above 0 (``--days``, ``--starvation-limit``)."""
    value = _float(text)
    return _checked(value, text, value > 0, "above 0")


def non_negative_float(text: str) -> float:
    """A finite number, 0 or more (``--protected-runtime``: 0 protects nothing)."""
    value = _float(text)
    return _checked(value, text, value >= 0, "0 or more")


def output_file(text: str) -> Path:
    """A file to write (``--report``): its folder must exist and be writable, and it must not
    itself be a folder -- checked before a run of minutes, not after it."""
    path = Path(text).expanduser()
    folder = path.parent
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file name")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write in folder {folder}")
    return path


def _checked(value: Number, text: str, ok: bool, wanted: str) -> Number:
    if not ok:
        raise argparse.ArgumentTypeError(f"must be {wanted}, got {text.strip()}")
    return value


def _int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _float(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value
