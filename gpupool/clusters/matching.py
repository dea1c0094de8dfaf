"""Which nodes a pod may go to: its nodeSelector, required node affinity and tolerations.

The rules are kube-scheduler's (Kubernetes v1.36, read in its sources): the ``NodeAffinity``
filter (``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``: nodeSelector AND any one
of the required terms; a term ANDs its ``matchExpressions`` and ``matchFields``; an empty term
or a malformed one matches nothing; label requirements as in ``k8s.io/apimachinery/pkg/labels``)
and the ``TaintToleration`` filter (``k8s.io/api/core/v1`` ``Toleration.ToleratesTaint``: only
NoSchedule and NoExecute taints keep a pod away; an empty effect or key in a toleration
matches all; an empty operator is Equal). Gt/Lt tolerations (feature gate
``TaintTolerationComparisonOperators``, alpha and off by default in v1.36) are honoured only
when ``comparison_operators`` is True, as the scheduler does with the gate.

The kubelet refuses a binding that breaks these, so gpupool must never plan one: the control
loop gives each pod set the ``AllowedNodes.for_pod`` set in its snapshot.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpupool.clusters.base import (
    NodeFacts,
    NodeSelectorTerm,
    PodFacts,
    SelectorRequirement,
    Taint,
    Toleration,
)

BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
NODE_NAME_FIELD = "metadata.name"
_INT64 = (-(2**63), 2**63 - 1)
_DECIMAL_INTEGER = re.compile(r"^(0|-?[1-9][0-9]*)$")  # content.IsDecimalInteger
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``: an optional sign, decimal digits, in range."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if _INT64[0] <= value <= _INT64[1] else None


def _is_label_value(text: str) -> bool:
    return len(text) <= 63 and _LABEL_VALUE.match(text) is not None


def _well_formed(requirement: SelectorRequirement) -> bool:
    """Whether ``labels.NewRequirement`` accepts it (a malformed one spoils its whole term)."""
    values, operator = requirement.values, requirement.operator
    if operator in ("In", "NotIn"):
        shape_ok = bool(values)
    elif operator in ("Exists", "DoesNotExist"):
        shape_ok = not values
    elif operator in ("Gt", "Lt"):
        shape_ok = len(values) == 1 and _int64(values[0]) is not None
    else:
        return False
    return shape_ok and all(_is_label_value(v) for v in values)


def requirement_matches(requirement: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    """Whether a node's labels meet one ``matchExpressions`` entry (assumed well formed)."""
    value = labels.get(requirement.key)
    operator = requirement.operator
    if operator == "In":
        return value is not None and value in requirement.values
    if operator == "NotIn":
        return value is None or value not in requirement.values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None:
        have, bound = _int64(value), _int64(requirement.values[0])
        if have is None or bound is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _field_matches(requirement: SelectorRequirement, node_name: str) -> bool | None:
    """A ``matchFields`` entry on ``metadata.name``; None when it is malformed."""
    if (
        requirement.key != NODE_NAME_FIELD
        or requirement.operator not in ("In", "NotIn")
        or len(requirement.values) != 1
    ):
        return None
    equal = node_name == requirement.values[0]
    return equal if requirement.operator == "In" else not equal


def term_matches(term: NodeSelectorTerm, node_name: str, labels: Mapping[str, str]) -> bool:
    """Whether a node meets one node selector term (an empty or malformed term: never)."""
    if not term.match_expressions and not term.match_fields:
        return False
    if not all(_well_formed(r) for r in term.match_expressions):
        return False
    fields = [_field_matches(r, node_name) for r in term.match_fields]
    if any(result is None for result in fields):
        return False
    return all(fields) and all(requirement_matches(r, labels) for r in term.match_expressions)


def affinity_matches(
    terms: tuple[NodeSelectorTerm, ...] | None, node_name: str, labels: Mapping[str, str]
) -> bool:
    """Whether a node meets a required node affinity (terms ORed; None: no affinity)."""
    if terms is None:
        return True
    return any(term_matches(term, node_name, labels) for term in terms)


def selector_matches(node_selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Whether a node carries every label of a pod's ``nodeSelector``."""
    return all(labels.get(key) == value for key, value in node_selector.items())


def tolerates(toleration: Toleration, taint: Taint, *, comparison_operators: bool = False) -> bool:
    """Whether one toleration tolerates one taint."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    operator = toleration.operator
    if operator in ("", "Equal"):
        return toleration.value == taint.value
    if operator == "Exists":
        return True
    if operator in ("Gt", "Lt") and comparison_operators:
        if not (_DECIMAL_INTEGER.match(toleration.value) and _DECIMAL_INTEGER.match(taint.value)):
            return False
        mine, theirs = _int64(toleration.value), _int64(taint.value)
        if mine is None or theirs is None:
            return False
        return theirs > mine if operator == "Gt" else theirs < mine
    return False


def untolerated_taint(
    taints: Iterable[Taint],
    tolerations: Iterable[Toleration],
    *,
    comparison_operators: bool = False,
) -> Taint | None:
    """The first NoSchedule/NoExecute taint no toleration tolerates, or None."""
    tolerations = tuple(tolerations)
    for taint in taints:
        if taint.effect not in BLOCKING_EFFECTS:
            continue
        if not any(
            tolerates(t, taint, comparison_operators=comparison_operators) for t in tolerations
        ):
            return taint
    return None


@dataclass(frozen=True, slots=True)
class SchedulingConstraints:
    """What in a pod restricts its nodes; pods with equal constraints have equal node sets."""

    node_selector: tuple[tuple[str, str], ...] = ()
    required_node_affinity: tuple[NodeSelectorTerm, ...] | None = None
    tolerations: tuple[Toleration, ...] = ()

    @classmethod
    def of(cls, pod: PodFacts) -> SchedulingConstraints:
        """The constraints of a pod."""
        return cls(
            tuple(sorted(pod.node_selector.items())),
            pod.required_node_affinity,
            tuple(sorted(set(pod.tolerations), key=repr)),
        )


def refusal(
    constraints: SchedulingConstraints, node: NodeFacts, *, comparison_operators: bool = False
) -> str | None:
    """Why the node is not allowed for these constraints (a short phrase), or None if it is."""
    if not selector_matches(dict(constraints.node_selector), node.labels):
        return "node selector"
    if not affinity_matches(constraints.required_node_affinity, node.name, node.labels):
        return "node affinity"
    taint = untolerated_taint(
        node.taints, constraints.tolerations, comparison_operators=comparison_operators
    )
    if taint is not None:
        value = f"={taint.value}" if taint.value else ""
        return f"taint {taint.key}{value}:{taint.effect}"
    return None


class AllowedNodes:
    """The allowed nodes of pods, against one set of nodes, remembered per constraint set.

    Built once and kept up to date with ``put``/``remove`` as nodes change; answers for a pod
    set cost one lookup after the first. Cordon, readiness and flavor are not judged here
    (``inventory`` does), only what the pod itself asks of a node.
    """

    def __init__(self, nodes: Iterable[NodeFacts] = (), *, comparison_operators: bool = False):
        self._nodes: dict[str, NodeFacts] = {}
        self._comparison_operators = comparison_operators
        self._memo: dict[SchedulingConstraints, frozenset[str]] = {}
        self._all: frozenset[str] | None = None
        for node in nodes:
            self._nodes[node.name] = node

    def put(self, node: NodeFacts) -> None:
        """Add or update a node."""
        if self._nodes.get(node.name) != node:
            self._nodes[node.name] = node
            self._forget()

    def remove(self, name: str) -> None:
        """Forget a node."""
        if self._nodes.pop(name, None) is not None:
            self._forget()

    def _forget(self) -> None:
        self._memo.clear()
        self._all = None

    def all_nodes(self) -> frozenset[str]:
        """Every node known."""
        if self._all is None:
            self._all = frozenset(self._nodes)
        return self._all

    def for_constraints(self, constraints: SchedulingConstraints) -> frozenset[str]:
        """The names of the nodes that meet the constraints."""
        allowed = self._memo.get(constraints)
        if allowed is None:
            allowed = frozenset(
                name
                for name, node in self._nodes.items()
                if refusal(constraints, node, comparison_operators=self._comparison_operators)
                is None
            )
            self._memo[constraints] = allowed
        return allowed

    def for_pod(self, pod: PodFacts) -> frozenset[str]:
        """The names of the nodes this pod may be bound to."""
        return self.for_constraints(SchedulingConstraints.of(pod))
