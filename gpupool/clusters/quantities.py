"""Kubernetes resource quantities ("500m", "64Gi", "1e3") as exact numbers, stdlib only.

The grammar is the one of ``k8s.io/apimachinery/pkg/api/resource`` (``Quantity``): a signed
decimal number followed by a binary-SI suffix (Ki Mi Gi Ti Pi Ei), a decimal-SI suffix
(n u m k M G T P E) or a decimal exponent (e3, E-2). Values are parsed into ``Fraction`` so
that nothing is rounded until the caller says how: requests round up (a pod never asks less
than it said), allocatable capacity rounds down (a node never offers more than it has), as
kube-scheduler's ``MilliValue``/``Value`` conversions err on the side of not over-committing.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction

_NUMBER = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)$")
# Kubernetes itself caps quantities far below this; the bound keeps an absurd exponent
# ("1e999999999") from building a number with a billion digits.
MAX_EXPONENT = 30
MAX_LENGTH = 64
MIB = 2**20


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity (or one beyond the supported range)."""


@functools.lru_cache(maxsize=4096)  # a pool repeats a few quantities ("8", "64Gi") endlessly
def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity string; raise QuantityError if it is not one."""
    if not isinstance(text, str) or not text or len(text) > MAX_LENGTH:
        raise QuantityError(f"{text!r} is not a quantity")
    match = _NUMBER.match(text.strip())
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity")
    number, suffix = Fraction(match.group(1)), match.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * Fraction(10) ** _DECIMAL[suffix]
    exponent = _EXPONENT.match(suffix)
    if exponent is None:
        raise QuantityError(f"{text!r}: unknown suffix {suffix!r}")
    power = int(exponent.group(1))
    if abs(power) > MAX_EXPONENT:
        raise QuantityError(f"{text!r}: exponent beyond +-{MAX_EXPONENT}")
    return number * Fraction(10) ** power


def _rounded(value: Fraction, round_up: bool) -> int:
    return math.ceil(value) if round_up else math.floor(value)


def cpu_milli(text: str, *, round_up: bool) -> int:
    """A CPU quantity in milli-CPU ("1.5" -> 1500, "250m" -> 250)."""
    return _rounded(parse_quantity(text) * 1000, round_up)


def memory_mib(text: str, *, round_up: bool) -> int:
    """A memory quantity in MiB ("1Gi" -> 1024; "1G" is 953.67 MiB: 954 up, 953 down)."""
    return _rounded(parse_quantity(text) / MIB, round_up)


def whole_count(text: str, *, round_up: bool) -> int:
    """A count of an extended resource such as ``nvidia.com/gpu`` ("8" -> 8)."""
    return _rounded(parse_quantity(text), round_up)
