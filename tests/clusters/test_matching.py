"""A pod's nodeSelector, required node affinity and tolerations give exactly kube-scheduler's nodes.

Each case was checked against Kubernetes v1.36's sources: the NodeAffinity filter
(component-helpers nodeaffinity, apimachinery labels.Requirement) and the TaintToleration
filter (core/v1 Toleration.ToleratesTaint).
"""

from __future__ import annotations

from typing import Any

import pytest
from cluster_builders import expr, node, pod, taint, term, toleration

from gpupool.clusters.base import Taint, Toleration
from gpupool.clusters.matching import (
    AllowedNodes,
    SchedulingConstraints,
    refusal,
    tolerates,
    untolerated_taint,
)

LABELS = {"zone": "a", "gpu": "h100", "gen": "9", "team": "nlp"}

# (case, matchExpressions of one term, node labels, allowed)
AFFINITY_CASES: list[tuple[str, list[dict[str, Any]], dict[str, str], bool]] = [
    ("In matches a listed value", [expr("zone", "In", "a", "b")], LABELS, True),
    ("In does not match an unlisted value", [expr("zone", "In", "b", "c")], LABELS, False),
    ("In does not match a missing label", [expr("rack", "In", "r1")], LABELS, False),
    ("NotIn matches an unlisted value", [expr("zone", "NotIn", "b")], LABELS, True),
    ("NotIn does not match a listed value", [expr("zone", "NotIn", "a")], LABELS, False),
    ("NotIn matches a missing label", [expr("rack", "NotIn", "r1")], LABELS, True),
    ("Exists matches a present label", [expr("team", "Exists")], LABELS, True),
    ("Exists does not match a missing label", [expr("rack", "Exists")], LABELS, False),
    ("DoesNotExist matches a missing label", [expr("rack", "DoesNotExist")], LABELS, True),
    ("DoesNotExist does not match a present one", [expr("zone", "DoesNotExist")], LABELS, False),
    ("Gt matches a larger number", [expr("gen", "Gt", "8")], LABELS, True),
    ("Gt does not match an equal number", [expr("gen", "Gt", "9")], LABELS, False),
    ("Lt matches a smaller number", [expr("gen", "Lt", "10")], LABELS, True),
    ("Lt does not match a larger number", [expr("gen", "Lt", "3")], LABELS, False),
    ("Gt does not match a label that is no number", [expr("zone", "Gt", "1")], LABELS, False),
    ("Gt does not match a missing label", [expr("rack", "Gt", "1")], LABELS, False),
    ("Gt with a value that is no number spoils the term", [expr("gen", "Gt", "x")], LABELS, False),
    ("Gt with two values spoils the term", [expr("gen", "Gt", "1", "2")], LABELS, False),
    ("In without values spoils the term", [expr("zone", "In")], LABELS, False),
    ("Exists with values spoils the term", [expr("zone", "Exists", "a")], LABELS, False),
    ("an unknown operator spoils the term", [expr("zone", "Equals", "a")], LABELS, False),
    ("an invalid label value spoils the term", [expr("zone", "In", "a", "b c")], LABELS, False),
    ("expressions of a term are ANDed", [expr("zone", "In", "a"), expr("gpu", "In", "a100")],
     LABELS, False),
    ("expressions of a term all holding match", [expr("zone", "In", "a"), expr("gen", "Gt", "1")],
     LABELS, True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("expressions", "labels", "allowed"),
    [case[1:] for case in AFFINITY_CASES],
    ids=[case[0] for case in AFFINITY_CASES],
)
def test_node_affinity_operators_match_as_kube_scheduler_does(
    expressions: list[dict[str, Any]], labels: dict[str, str], allowed: bool
) -> None:
    the_pod = pod("p", terms=[term(*expressions)])
    the_node = node("n1", labels=labels, product=None)
    assert (refusal(SchedulingConstraints.of(the_pod), the_node) is None) is allowed


TERM_CASES: list[tuple[str, list[dict[str, Any]], bool]] = [
    ("terms are ORed: one matching term is enough",
     [term(expr("zone", "In", "b")), term(expr("zone", "In", "a"))], True),
    ("an empty term matches nothing", [term()], False),
    ("an empty term beside a matching one still allows", [term(), term(expr("zone", "Exists"))],
     True),
    ("matchFields In on metadata.name matches that node",
     [term(fields=[expr("metadata.name", "In", "n1")])], True),
    ("matchFields In on metadata.name refuses another node",
     [term(fields=[expr("metadata.name", "In", "n2")])], False),
    ("matchFields NotIn on metadata.name refuses that node",
     [term(fields=[expr("metadata.name", "NotIn", "n1")])], False),
    ("matchFields with two values spoils the term",
     [term(fields=[expr("metadata.name", "In", "n1", "n2")])], False),
    ("matchFields on another field spoils the term",
     [term(fields=[expr("metadata.uid", "In", "n1")])], False),
    ("matchFields with Exists spoils the term", [term(fields=[expr("metadata.name", "Exists")])],
     False),
    ("expressions and fields of one term are ANDed",
     [term(expr("zone", "In", "b"), fields=[expr("metadata.name", "In", "n1")])], False),
    ("a spoiled term does not stop another from matching",
     [term(expr("gen", "Gt", "x")), term(expr("zone", "In", "a"))], True),
]  # fmt: skip


@pytest.mark.parametrize(
    ("terms", "allowed"),
    [case[1:] for case in TERM_CASES],
    ids=[case[0] for case in TERM_CASES],
)
def test_node_selector_terms_combine_as_kube_scheduler_does(
    terms: list[dict[str, Any]], allowed: bool
) -> None:
    the_pod = pod("p", terms=terms)
    the_node = node("n1", labels=LABELS, product=None)
    assert (refusal(SchedulingConstraints.of(the_pod), the_node) is None) is allowed


def test_a_required_affinity_without_terms_matches_no_node() -> None:
    the_pod = pod("p", terms=[])
    assert refusal(SchedulingConstraints.of(the_pod), node("n1")) == "node affinity"


def test_node_selector_needs_every_label_with_its_value() -> None:
    the_node = node("n1", labels=LABELS, product=None)
    fits = pod("p", node_selector={"zone": "a", "gpu": "h100"})
    wrong_value = pod("q", node_selector={"zone": "a", "gpu": "a100"})
    missing = pod("r", node_selector={"rack": "r1"})
    assert refusal(SchedulingConstraints.of(fits), the_node) is None
    assert refusal(SchedulingConstraints.of(wrong_value), the_node) == "node selector"
    assert refusal(SchedulingConstraints.of(missing), the_node) == "node selector"


def test_node_selector_and_affinity_must_both_hold() -> None:
    the_node = node("n1", labels=LABELS, product=None)
    the_pod = pod("p", node_selector={"zone": "a"}, terms=[term(expr("gpu", "In", "a100"))])
    assert refusal(SchedulingConstraints.of(the_pod), the_node) == "node affinity"


# (case, toleration, taint, tolerated)
TOLERATION_CASES: list[tuple[str, Toleration, Taint, bool]] = [
    ("Equal with the same key, value and effect tolerates",
     Toleration("dedicated", "Equal", "nlp", "NoSchedule"), Taint("dedicated", "nlp"), True),
    ("Equal with another value does not tolerate",
     Toleration("dedicated", "Equal", "cv", "NoSchedule"), Taint("dedicated", "nlp"), False),
    ("an empty operator means Equal", Toleration("dedicated", "", "nlp"),
     Taint("dedicated", "nlp"), True),
    ("Exists tolerates any value of its key", Toleration("dedicated", "Exists"),
     Taint("dedicated", "nlp"), True),
    ("Exists does not tolerate another key", Toleration("gpu", "Exists"),
     Taint("dedicated", "nlp"), False),
    ("an empty key with Exists tolerates every taint", Toleration("", "Exists"),
     Taint("anything", "x", "NoExecute"), True),
    ("an empty effect tolerates every effect", Toleration("dedicated", "Exists", effect=""),
     Taint("dedicated", "nlp", "NoExecute"), True),
    ("another effect does not tolerate",
     Toleration("dedicated", "Exists", effect="NoSchedule"),
     Taint("dedicated", "nlp", "NoExecute"), False),
    ("Gt is not honoured while its feature gate is off", Toleration("sla", "Gt", "900"),
     Taint("sla", "950"), False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("the_toleration", "the_taint", "tolerated"),
    [case[1:] for case in TOLERATION_CASES],
    ids=[case[0] for case in TOLERATION_CASES],
)
def test_tolerations_tolerate_as_core_v1_does(
    the_toleration: Toleration, the_taint: Taint, tolerated: bool
) -> None:
    assert tolerates(the_toleration, the_taint) is tolerated


@pytest.mark.parametrize(
    ("operator", "threshold", "taint_value", "tolerated"),
    [
        ("Gt", "900", "950", True),
        ("Gt", "950", "950", False),
        ("Lt", "900", "850", True),
        ("Lt", "900", "950", False),
        ("Gt", "0900", "950", False),  # not a decimal integer in canonical form
        ("Gt", "900", "high", False),
    ],
    ids=lambda value: str(value),
)
def test_comparison_tolerations_compare_numbers_when_the_gate_is_on(
    operator: str, threshold: str, taint_value: str, tolerated: bool
) -> None:
    the_toleration = Toleration("sla", operator, threshold)
    assert (
        tolerates(the_toleration, Taint("sla", taint_value), comparison_operators=True) is tolerated
    )


def test_only_noschedule_and_noexecute_taints_keep_a_pod_away() -> None:
    taints = [Taint("soft", "", "PreferNoSchedule"), Taint("hard", "", "NoExecute")]
    assert untolerated_taint(taints, []) == Taint("hard", "", "NoExecute")
    assert untolerated_taint(taints[:1], []) is None


def test_a_pod_goes_only_to_tainted_nodes_it_tolerates() -> None:
    nodes = [
        node("plain"),
        node("gpu-tainted", taints=[taint("nvidia.com/gpu", "present")]),
        node("reserved", taints=[taint("dedicated", "nlp")]),
    ]
    allowed = AllowedNodes(nodes)
    tolerant = pod("t", tolerations=[toleration("nvidia.com/gpu", "Exists")])
    plain = pod("p")
    assert allowed.for_pod(tolerant) == {"plain", "gpu-tainted"}
    assert allowed.for_pod(plain) == {"plain"}
    assert refusal(SchedulingConstraints.of(plain), nodes[2]) == "taint dedicated=nlp:NoSchedule"


def test_allowed_nodes_follow_node_changes() -> None:
    allowed = AllowedNodes([node("a", labels={"zone": "x"}), node("b", labels={"zone": "y"})])
    zoned = pod("p", node_selector={"zone": "x"})
    assert allowed.for_pod(zoned) == {"a"}
    allowed.put(node("b", labels={"zone": "x"}))
    assert allowed.for_pod(zoned) == {"a", "b"}
    allowed.remove("a")
    assert allowed.for_pod(zoned) == {"b"}
    assert allowed.all_nodes() == {"b"}


def test_pods_with_the_same_constraints_share_one_answer() -> None:
    allowed = AllowedNodes([node("a"), node("b")])
    first = allowed.for_pod(pod("p-0", tolerations=[toleration("x", "Exists")]))
    second = allowed.for_pod(pod("p-1", tolerations=[toleration("x", "Exists")]))
    assert first is second
