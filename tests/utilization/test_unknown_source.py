"""A ``GPUPOOL_UTILIZATION_SOURCE`` the table of sources does not hold is an error naming the
setting and the names it takes -- in ``manage.py check`` and in the sampler -- never taken
for ``none``."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from gpupool.utilization.sampling import source_for

NAMES = "kubernetes, none, prometheus, simulated"


def test_manage_py_check_fails_on_an_unknown_source_naming_the_setting_and_the_names(
    settings: Any,
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "bogus"

    with pytest.raises(SystemCheckError) as raised:
        call_command("check", stdout=StringIO(), stderr=StringIO())

    message = str(raised.value)
    assert "utilization.E001" in message
    assert "GPUPOOL_UTILIZATION_SOURCE" in message and "'bogus'" in message
    assert NAMES in message


@pytest.mark.parametrize("name", ["none", "kubernetes", "simulated", "prometheus"])
def test_manage_py_check_passes_for_each_source_of_the_table(settings: Any, name: str) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = name
    out = StringIO()

    call_command("check", stdout=out, stderr=StringIO())

    assert "no issues" in out.getvalue()


def test_the_sampler_refuses_an_unknown_source_saying_which_names_it_takes(
    settings: Any,
) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "bogus"
    backend: Any = object()  # never reached: the name is refused first

    with pytest.raises(ValueError, match="GPUPOOL_UTILIZATION_SOURCE is 'bogus'") as raised:
        source_for(backend)

    assert NAMES in str(raised.value) and "none of" not in str(raised.value)
