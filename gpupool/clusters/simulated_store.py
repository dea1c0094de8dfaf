"""Where the simulated cluster keeps its objects: one model, two stores.

The simulated cluster (``simulated.py``) is a small API server over Kubernetes objects
(Nodes, Pods, PodDisruptionBudgets, Events). It keeps them in a store, as kube-apiserver keeps
them in etcd: every write gets the next *revision* of the whole store, a deletion leaves a
tombstone with its revision, and a reader asks for everything changed since the revision it
last saw (a watch), or lists everything (a re-list) when the tombstones it would need have
been compacted away.

Two stores implement the same protocol:

- ``MemoryStore`` (here): plain dictionaries behind a lock, for tests, replays and benchmarks;
  each object keeps its facts once computed, so a read never decodes an object twice;
- ``DatabaseStore`` (``gpupool.simcluster.store``): the same objects as database rows, so that
  the demo's control loop, workload generator and fault-injection commands, each in its own
  process, share one simulated cluster that outlives them.
"""

from __future__ import annotations

import bisect
import heapq
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from gpupool.clusters import api_objects
from gpupool.clusters.base import NodeFacts, PodFacts

Kind = Literal["Node", "Pod", "PodDisruptionBudget", "Event"]
ObjectKey = tuple[str, str, str]  # kind, namespace ("" for nodes), name
JsonObject = Mapping[str, Any]


@dataclass(frozen=True, slots=True, eq=False)
class StoredObject:
    """One object of the simulated cluster as the store holds it.

    ``body`` is the Kubernetes object exactly as the API would return it (never changed in
    place: a write stores a new one). ``sim`` is the simulator's own bookkeeping that no
    real object carries (a pod's run time, the devices it holds, when a controller acts on
    it). ``due_at`` is when the cluster's controllers next change the object on their own
    (a pod starts, ends or is evicted from a lost node; an Event expires), ``node`` the node
    a pod is bound to (both indexed by the stores). ``facts`` caches the decoded facts.
    """

    kind: str
    namespace: str
    name: str
    body: JsonObject
    sim: JsonObject = field(default_factory=dict)
    revision: int = 0
    due_at: float | None = None
    node: str = ""
    deleted: bool = False
    facts: NodeFacts | PodFacts | None = None

    @property
    def key(self) -> ObjectKey:
        """Kind, namespace and name: how the store addresses the object."""
        return (self.kind, self.namespace, self.name)

    def evolve(self, **changes: Any) -> StoredObject:
        """A copy with some fields changed (``dataclasses.replace``, without its cost)."""
        get = changes.get
        return _built(
            get("kind", self.kind),
            get("namespace", self.namespace),
            get("name", self.name),
            get("body", self.body),
            get("sim", self.sim),
            get("revision", self.revision),
            get("due_at", self.due_at),
            get("node", self.node),
            get("deleted", self.deleted),
            get("facts", self.facts),
        )

    def decoded(self) -> NodeFacts | PodFacts | None:
        """The object's facts (decoded once, then cached); None for other kinds."""
        if self.facts is not None or self.deleted:
            return self.facts
        facts: NodeFacts | PodFacts | None = None
        if self.kind == "Node":
            facts = api_objects.node_facts(self.body)
        elif self.kind == "Pod":
            facts = api_objects.pod_facts(self.body)
        object.__setattr__(self, "facts", facts)  # a cache of what body says, not state
        return facts


_NEW = object.__new__
# The slots' own setters: a frozen dataclass's ``__init__`` sets each field through
# ``object.__setattr__``, about three times the cost (a bound pod is written twice).
(
    _SET_KIND,
    _SET_NAMESPACE,
    _SET_NAME,
    _SET_BODY,
    _SET_SIM,
    _SET_REVISION,
    _SET_DUE_AT,
    _SET_NODE,
    _SET_DELETED,
    _SET_FACTS,
) = (getattr(StoredObject, name).__set__ for name in StoredObject.__slots__)


def _built(
    kind: str,
    namespace: str,
    name: str,
    body: JsonObject,
    sim: JsonObject,
    revision: int,
    due_at: float | None,
    node: str,
    deleted: bool,
    facts: NodeFacts | PodFacts | None,
) -> StoredObject:
    """A ``StoredObject`` of these fields, every one given (its initialiser, cheaper)."""
    obj: StoredObject = _NEW(StoredObject)
    _SET_KIND(obj, kind)
    _SET_NAMESPACE(obj, namespace)
    _SET_NAME(obj, name)
    _SET_BODY(obj, body)
    _SET_SIM(obj, sim)
    _SET_REVISION(obj, revision)
    _SET_DUE_AT(obj, due_at)
    _SET_NODE(obj, node)
    _SET_DELETED(obj, deleted)
    _SET_FACTS(obj, facts)
    return obj


@dataclass(frozen=True, slots=True)
class StoreChanges:
    """What a reader asked for: the objects changed since its revision (latest state each,
    tombstones for deletions), or every live object when ``relist`` is True."""

    revision: int
    objects: Sequence[StoredObject]
    relist: bool = False


class StoreTransaction(Protocol):
    """Reads and writes inside one atomic, serialised transaction of a store."""

    def get(self, kind: str, namespace: str, name: str) -> StoredObject | None:
        """The live object, or None (absent or deleted)."""
        ...

    def select(
        self, kind: str, *, namespace: str | None = None, node: str | None = None
    ) -> list[StoredObject]:
        """Live objects of a kind, optionally of one namespace or bound to one node."""
        ...

    def due(self, now: float) -> list[StoredObject]:
        """Live objects whose ``due_at`` has come (at or before ``now``), earliest first."""
        ...

    def put(self, obj: StoredObject) -> StoredObject:
        """Create or replace an object; it gets the next revision, which is returned on it."""
        ...

    def remove(self, obj: StoredObject) -> None:
        """Delete an object, leaving a tombstone with the next revision."""
        ...

    def changes_since(self, revision: int) -> StoreChanges:
        """The store's ``changes_since``, read inside the transaction (its writes so far
        included)."""
        ...

    @property
    def revision(self) -> int:
        """The store's revision now: its last write's, this transaction's included."""
        ...


class SimulatedStore(Protocol):
    """Storage of the simulated cluster: atomic transactions, revisions, change reads."""

    def transaction(self) -> AbstractContextManager[StoreTransaction]:
        """An atomic transaction, serialised with every other writer of the store."""
        ...

    def changes_since(self, revision: int) -> StoreChanges:
        """Objects changed after ``revision``; a re-list when that is too old (or 0)."""
        ...

    def next_due(self) -> float | None:
        """The earliest ``due_at`` of any live object (None: nothing will happen by itself)."""
        ...


class MemoryStore:
    """The simulated cluster's objects in memory (thread-safe; one process).

    Keeps the last ``history_limit`` writes for ``changes_since``; a reader further behind
    re-lists, as an informer does after a 410 Gone.
    """

    def __init__(self, history_limit: int = 200_000) -> None:
        self._lock = threading.RLock()
        self._objects: dict[ObjectKey, StoredObject] = {}  # tombstones included
        self._by_node: dict[str, set[ObjectKey]] = {}
        # Keys by kind, in the order ``_objects`` holds them (selects by kind without a scan
        # of every pod: a PDB or Node select per evicted pod was O(pool)).
        self._by_kind: dict[str, dict[ObjectKey, None]] = {}
        self._history_revisions: list[int] = []  # ascending
        self._history_keys: list[ObjectKey] = []
        self._history_limit = history_limit
        self._compacted = 0  # changes after this revision are all in the history
        self.revision = 0
        self._due: dict[ObjectKey, float] = {}  # live objects' due_at
        self._due_heap: list[tuple[float, ObjectKey]] = []  # may hold outdated entries

    @contextmanager
    def transaction(self) -> Iterator[StoreTransaction]:
        """The store's lock held for the whole transaction; changes apply as they are made.

        A transaction that raises keeps what it wrote before the error: the simulated
        cluster's operations check first and write last, so they never leave half a change.
        """
        with self._lock:
            yield _MemoryTransaction(self)

    def changes_since(self, revision: int) -> StoreChanges:
        """Objects changed after ``revision``, or every live one (re-list)."""
        with self._lock:
            if revision <= 0 or revision < self._compacted:
                live = [obj for obj in self._objects.values() if not obj.deleted]
                return StoreChanges(self.revision, live, relist=True)
            start = bisect.bisect_right(self._history_revisions, revision)
            keys = dict.fromkeys(self._history_keys[start:])
            return StoreChanges(self.revision, [self._objects[key] for key in keys])

    def next_due(self) -> float | None:
        """The earliest ``due_at`` of a live object."""
        with self._lock:
            heap = self._due_heap
            while heap and self._due.get(heap[0][1]) != heap[0][0]:
                heapq.heappop(heap)  # outdated: the object was rewritten or removed since
            return heap[0][0] if heap else None

    # - used by the transaction, under the lock -

    def _write(self, obj: StoredObject) -> StoredObject:
        self.revision += 1
        key = obj.key  # a new tuple each time it is asked for
        previous = self._objects.get(key)
        body = obj.body
        if obj.kind in ("Node", "Pod") and not obj.deleted:
            metadata = {**body.get("metadata", {}), "resourceVersion": str(self.revision)}
            body = {**body, "metadata": metadata}
        stored = _built(obj.kind, obj.namespace, obj.name, body, obj.sim, self.revision,
                        obj.due_at, obj.node, obj.deleted, obj.facts)  # fmt: skip
        self._objects[key] = stored
        if previous is None:
            self._by_kind.setdefault(obj.kind, {})[key] = None
        if previous is not None and previous.node:
            self._by_node.get(previous.node, set()).discard(key)
        if stored.node and not stored.deleted:
            self._by_node.setdefault(stored.node, set()).add(key)
        if stored.due_at is not None and not stored.deleted:
            if self._due.get(key) != stored.due_at:
                heapq.heappush(self._due_heap, (stored.due_at, key))
            self._due[key] = stored.due_at
        else:
            self._due.pop(key, None)
        self._history_revisions.append(self.revision)
        self._history_keys.append(key)
        if len(self._history_keys) > self._history_limit:
            self._compact()
        return stored

    def _compact(self) -> None:
        """Forget the older half of the history and the tombstones only it needed."""
        cut = len(self._history_keys) // 2
        self._compacted = self._history_revisions[cut - 1]
        del self._history_revisions[:cut]
        del self._history_keys[:cut]
        for key in [k for k, o in self._objects.items() if o.deleted]:
            if self._objects[key].revision <= self._compacted:
                del self._objects[key]
                del self._by_kind[key[0]][key]


class _MemoryTransaction:
    """``StoreTransaction`` of a ``MemoryStore`` (the store's lock is held)."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def get(self, kind: str, namespace: str, name: str) -> StoredObject | None:
        obj = self._store._objects.get((kind, namespace, name))
        return None if obj is None or obj.deleted else obj

    def select(
        self, kind: str, *, namespace: str | None = None, node: str | None = None
    ) -> list[StoredObject]:
        objects = self._store._objects
        if node is not None:
            keys: Iterable[ObjectKey] = sorted(self._store._by_node.get(node, ()))
        else:
            keys = self._store._by_kind.get(kind, ())
        candidates = [objects[key] for key in keys]
        return [
            obj
            for obj in candidates
            if obj.kind == kind
            and not obj.deleted
            and (namespace is None or obj.namespace == namespace)
        ]

    def due(self, now: float) -> list[StoredObject]:
        store = self._store
        heap, found = store._due_heap, {}
        while heap and heap[0][0] <= now:
            at, key = heapq.heappop(heap)
            if store._due.get(key) == at:
                found[key] = at
        for key, at in found.items():  # still due until the caller rewrites them
            heapq.heappush(heap, (at, key))
        return [store._objects[key] for key in sorted(found, key=lambda k: (found[k], k))]

    def put(self, obj: StoredObject) -> StoredObject:
        return self._store._write(obj.evolve(deleted=False) if obj.deleted else obj)

    def remove(self, obj: StoredObject) -> None:
        self._store._write(obj.evolve(deleted=True, due_at=None, node="", facts=None))

    def changes_since(self, revision: int) -> StoreChanges:
        return self._store.changes_since(revision)  # (the store's lock is re-entrant)

    @property
    def revision(self) -> int:
        return self._store.revision
