"""``gpupool why`` says a MIG workload's sentence in MIG instances, as the core wrote it.

A "behind" sentence says the position, so the API says it again from its facts with the
current one (``workloads.queries.sentence``); it did so without the flavors' units, and ``why``
printed "Why: ... 2 a100-3g.40gb GPUs of quota left ..." of nlp's MIG work where the core had
said MIG instances. ``gpupool status`` prints the reason only ("behind"), no sentence."""

from __future__ import annotations

from typing import Any

import pytest
from client_cli import run
from domain_builders import mig_beside
from two_teams import MIG_BEHIND_SAYS, Pool, mig_behind, nlp_and_vision

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pool(live_client: Any) -> Pool:
    """nlp's member max, logged in; nlp's MIG work ``slices`` second in line and ``first``
    ahead of it, both waiting behind others for quota as the core says it."""
    made = nlp_and_vision()
    mig_beside(made)
    mig_behind(made, "first", 1.0)
    mig_behind(made, "slices", 2.0)
    live_client(made.users["max"])
    return made


def test_why_says_the_sentence_said_again_in_mig_instances(pool: Pool) -> None:
    status, out, err = run("why", "nlp/slices")
    assert status == 0, err
    why = next(line for line in out.splitlines() if line.startswith("Why: "))
    for words in MIG_BEHIND_SAYS:
        assert words in why, out
    assert "position 2 in queue nlp" in why, out  # said again: the core wrote position 1
    assert "GPUs" not in why, out


def test_status_says_the_reason_and_the_mig_instances_asked(pool: Pool) -> None:
    status, out, err = run("status")
    assert status == 0, err
    row = next(line for line in out.splitlines() if line.startswith("nlp/slices "))
    assert "4 MIG instances" in row and row.rstrip().endswith("behind"), out
    assert "GPU" not in row, out
