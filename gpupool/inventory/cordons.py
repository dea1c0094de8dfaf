"""Who cordoned a node, when and why: the Cluster page's node row and the nodes API say it.

The node's row keeps only that it is cordoned (and when a drain was asked); who cordoned it
and why are the audit log's, written by the action that did it (``do_set_node_cordoned``,
``do_drain_node``), as a drain's who and why are (``workloads.queries.DRAIN_ACTIONS``). So
they are read from there -- one query for a page of nodes -- rather than copied onto the
node's row, where a second copy of them would have to be kept in step with the log. A node
cordoned in the cluster itself (``kubectl cordon``), not by gpupool, has no audit row: its note
says so."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gpupool.audit.models import AuditEvent
from gpupool.clusters.inventory import CORDONED_IN_CLUSTER

if TYPE_CHECKING:
    from gpupool.inventory.models import Node

NODE_TYPE = "inventory.node"  # the audit rows' ``object_type`` of a node
CORDON = "inventory.set_node_cordoned"  # cordons and uncordons (``after["cordoned"]`` says)
DRAIN = "inventory.drain_node"  # a drain cordons the node too
SYSTEM = "the system"  # who did it, for an audit row without a user (as a drain's words)
IN_CLUSTER_WORDS = "cordoned in the cluster (kubectl cordon), not by gpupool"
NOT_RECORDED_WORDS = "cordoned by gpupool; the audit log does not say by whom or why"


@dataclass(frozen=True, slots=True)
class CordonNote:
    """Why a node is cordoned: by whom (a username, ``the system``), when (the audit row's
    moment, on the pool's clock) and why, and whether it was by a drain; ``recorded`` false for
    a cordon of gpupool's no audit row tells of, ``in_cluster`` for the cluster's own."""

    by: str | None = None
    at: datetime | None = None
    reason: str = ""
    drain: bool = False
    recorded: bool = True
    in_cluster: bool = False

    @property
    def verb(self) -> str:
        """What was done: ``cordoned``, or ``drained`` (a drain cordons too)."""
        return "drained" if self.drain else "cordoned"

    def words(self) -> str:
        """The note in one phrase, its moment in UTC as the pages write a moment (the Cluster
        page writes it in the viewer's zone): "cordoned by ada at 2026-12-07 18:19 UTC: XID
        storm"."""
        if self.in_cluster:
            return IN_CLUSTER_WORDS
        if not self.recorded:
            return NOT_RECORDED_WORDS
        when = f" at {self.at.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if self.at is not None else ""
        return f"{self.verb} by {self.by}{when}{self.why}"

    @property
    def why(self) -> str:
        """``: <reason>``, or `` (no reason given)``."""
        return f": {self.reason}" if self.reason.strip() else " (no reason given)"


def cordon_notes(nodes: Iterable[Node]) -> dict[int, CordonNote]:
    """Per node id, why the node is cordoned: for each of ``nodes`` cordoned by gpupool, the
    latest audit row that cordoned it (a cordon, or a drain) -- one query for them all --; for
    each cordoned in the cluster alone, a note saying so. Nodes not cordoned are left out."""
    notes: dict[int, CordonNote] = {}
    ours: list[int] = []
    for node in nodes:
        if node.cordoned:
            ours.append(node.pk)
            notes[node.pk] = CordonNote(recorded=False)
        elif node.cluster_exclusion == CORDONED_IN_CLUSTER:
            notes[node.pk] = CordonNote(in_cluster=True)
    if not ours:
        return notes
    rows = (
        AuditEvent.objects.filter(
            object_type=NODE_TYPE,
            object_id__in=[str(pk) for pk in ours],
            action__in=(CORDON, DRAIN),
        )
        .order_by("at", "id")
        .values_list("object_id", "action", "after", "at", "actor_name", "reason")
    )
    for object_id, action, after, at, actor, reason in rows:
        if action == CORDON and not (isinstance(after, dict) and after.get("cordoned")):
            continue  # an uncordon: the cordon in force is a later one
        notes[int(object_id)] = CordonNote(actor or SYSTEM, at, reason, drain=action == DRAIN)
    return notes
