"""A plain ``nvidia.com/gpu`` pod may use h100 or gb200; with a node selector no node of
either matches, its never-fits sentence (the pods' Event, ``gpupool why``) said "no h100 node
matches ..." -- only the first choice. The same verdict for every flavor it may use names
them all (``explain.across_flavors``); verdicts that differ keep the first's own numbers."""

from __future__ import annotations

from gpupool.scheduler import plan
from gpupool.scheduler.explain import (
    FLAVORS_FACT,
    Verdict,
    across_flavors,
    explanation,
    flavor_words,
)
from gpupool.scheduler.scenario import scenario_from_dict


def no_match(flavor: str) -> Verdict:
    """What the core says of one flavor choice whose nodes the selector all refuses."""
    return Verdict(
        "capacity",
        {"flavor": flavor, "resource": "node", "allowed_nodes": 0, "never_fits": True},
    )


def test_a_selector_no_node_of_any_choice_matches_names_every_choice() -> None:
    verdict = across_flavors([no_match("h100"), no_match("gb200")])
    assert verdict.facts["flavor"] == "h100"  # what the pages and the loop read is kept
    assert verdict.facts[FLAVORS_FACT] == ["h100", "gb200"]
    said = explanation("nlp/sel-nomatch", verdict, 0).detail
    assert said == (
        "It can never run as asked: no h100 or gb200 node matches its node selector, node "
        "affinity and tolerations."
    )


def test_three_choices_are_a_list_and_one_choice_is_said_as_before() -> None:
    three = across_flavors([no_match("h100"), no_match("gb200"), no_match("l40s")])
    assert flavor_words(three.facts) == "h100, gb200 or l40s"
    one = across_flavors([no_match("h100")])
    assert one == no_match("h100") and FLAVORS_FACT not in one.facts
    said = explanation("w", one, 0).detail
    assert "no h100 node matches" in said


def test_the_same_flavor_twice_is_named_once() -> None:
    # Two pod sets, each with the same choices: assignments repeat flavors.
    verdict = across_flavors([no_match("h100"), no_match("h100"), no_match("gb200")])
    assert verdict.facts[FLAVORS_FACT] == ["h100", "gb200"]


def test_verdicts_that_differ_in_their_numbers_keep_the_first_and_its_own_words() -> None:
    some = Verdict(
        "capacity",
        {
            "flavor": "gb200",
            "resource": "gpu",
            "allowed_nodes": 1,
            "asked": 16,
            "allowed_gpus": 4,
            "never_fits": True,
        },
    )
    verdict = across_flavors([no_match("h100"), some])
    assert verdict == no_match("h100")
    assert "no h100 node matches" in explanation("w", verdict, 0).detail


def test_allowed_nodes_of_each_choice_alike_say_the_count_of_a_node_in_the_singular() -> None:
    def small(flavor: str) -> Verdict:
        return Verdict(
            "capacity",
            {
                "flavor": flavor,
                "resource": "gpu",
                "allowed_nodes": 1,
                "asked": 16,
                "allowed_gpus": 8,
                "never_fits": True,
            },
        )

    said = explanation("w", across_flavors([small("h100"), small("gb200")]), 0).detail
    assert said == (
        "It can never run as asked: the 1 h100 or gb200 node its node selector, node affinity "
        "and tolerations allow has 8 healthy GPUs; it asks 16."
    )


def two_flavor_scenario() -> dict[str, object]:
    """sel-nomatch of the tester's pool: plain GPUs (h100 or gb200), a selector no node takes."""
    return {
        "now": "2026-12-06T10:00:00Z",
        "flavors": [{"name": "gb200"}, {"name": "h100"}],
        "nodes": [
            {"name": "g1", "flavor": "gb200", "gpus": 4},
            {"name": "h1", "flavor": "h100", "gpus": 8},
        ],
        "queues": [
            {"name": "root", "parent": None},
            {
                "name": "nlp",
                "parent": "root",
                "quota": {"h100": {"deserved": 8}, "gb200": {"deserved": 4}},
            },
        ],
        "priority_classes": [{"name": "normal", "value": 0, "default": True}],
        "workloads": [
            {
                "name": "nlp/sel-nomatch",
                "queue": "nlp",
                "submitted_at": "2026-12-06T09:00:00Z",
                "state": "pending",
                "pod_sets": [
                    {"count": 1, "gpus": 1, "flavor": ["h100", "gb200"], "allowed_nodes": []}
                ],
            }
        ],
    }


def test_the_plan_names_every_flavor_the_pod_may_use() -> None:
    scenario = scenario_from_dict(two_flavor_scenario())
    (pending,) = plan(scenario.snapshot, scenario.policy, scenario.now).pending
    assert pending.facts.get("never_fits") is True
    assert "no h100 or gb200 node matches" in pending.detail
