"""`gpupool utilization` refuses a bad --since naming the option once (argparse says
"argument --since: "; the message was "argument --since: --since: ...")."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


@pytest.mark.parametrize(
    ("since", "message"),
    [
        (
            "bogus",
            'argument --since: "bogus" is not a duration (seconds, or Go form like 2h or 1h30m)',
        ),
        ("0", "argument --since: must be longer than nothing, got 0"),
        ("0s", "argument --since: must be longer than nothing, got 0s"),
        ("100000h", 'argument --since: "100000h" is longer than'),
    ],
)
def test_a_bad_since_is_refused_naming_the_option_once(since: str, message: str) -> None:
    out = StringIO()
    with pytest.raises(CommandError, match=re.escape(message)) as refused:
        call_command("gpupool", "utilization", "--since", since, stdout=out)
    assert str(refused.value).count("--since") == 1
    assert out.getvalue() == ""
