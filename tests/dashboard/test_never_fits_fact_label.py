"""The facts table names a quota verdict's available GPUs for what they are: for work that
never fits, what the capabilities on its path allow at most (the sentence says so), not
"quota available", which another workload's table at the same moment uses for what is free
of its quota now (a tester read 160 against 75 as a contradiction)."""

from __future__ import annotations

from gpupool.dashboard.facts import fact_rows


def labels(facts: dict[str, object]) -> dict[str, str]:
    return {row.key: row.label for row in fact_rows(facts)}


def test_never_fitting_work_names_its_available_gpus_as_the_capabilities_allowance() -> None:
    facts: dict[str, object] = {"queue": "nlp", "flavor": "h100", "asked_gpus": 200.0}
    waiting = labels(facts | {"available_gpus": 75.0, "never_fits": False})
    never = labels(facts | {"available_gpus": 160.0, "never_fits": True})
    assert waiting["available_gpus"] == "quota available"
    assert never["available_gpus"] == "most the capabilities on its path allow"
