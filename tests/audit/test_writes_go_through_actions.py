"""Domain state changes only in ``actions.py``: a walk over every module of ``gpupool/`` finds
each call that saves, creates, updates, deletes or bulk-writes a model anywhere else.

What counts as a write, and how the walk tells a queryset from a dict:

- ``save``, ``delete``, ``get_or_create``, ``update_or_create``, ``bulk_create`` and
  ``bulk_update`` are writes on whatever they are called (no dict or set has them). Two calls
  are not: ``x.save(commit=False)`` (a form or formset building objects it does not store) and
  ``super().save()`` inside a model's own ``save`` (the model finishing its own write).
- ``create`` and ``update`` are writes only on a manager or queryset, because dicts, sets,
  hashes and progress bars have ``update`` too. A receiver is a queryset when its chain goes
  through ``.objects`` (or ``_default_manager``), through a reverse accessor of a domain
  model (``node.gpus``) in a module that imports Django or a domain app, or starts at a name
  bound to one (a parameter annotated ``QuerySet``/``Manager``, or assigned from a queryset).
- Actions (``<app>/actions.py``), migrations and tests may write. Anything else that must is
  listed in ``ALLOWED`` with the reason, and an entry that no longer matches fails the test.

Raw SQL and ``setattr`` on querysets are out of reach of this walk; review catches those.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.apps import apps
from domain_builders import DOMAIN_APPS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gpupool"

WRITES_ON_ANYTHING = frozenset(
    {"save", "delete", "get_or_create", "update_or_create", "bulk_create", "bulk_update"}
)
WRITES_ON_QUERYSETS = frozenset({"create", "update"})
MANAGERS = frozenset({"objects", "_default_manager", "_base_manager"})
QUERYSET_TYPES = ("QuerySet", "Manager")

# (module, enclosing function, method): why that write is not a domain write outside actions.
ALLOWED: dict[tuple[str, str, str], str] = {
    ("gpupool/cli/subcommands/seed_demo.py", "_user", "get_or_create"): (
        "demo users are Django accounts (auth.User), not domain state; no action owns them"
    ),
    ("gpupool/cli/subcommands/seed_demo.py", "_user", "save"): (
        "sets a demo account's flags and password (auth.User, not domain state)"
    ),
    ("gpupool/bulk.py", "insert_objects", "bulk_create"): (
        "the bulk insert that actions call (recording a cycle, rolling usage up, seeding a "
        "year) where there is no COPY; only actions import gpupool.bulk"
    ),
    ("gpupool/bulk.py", "_update_rows_elsewhere", "bulk_update"): (
        "the bulk update that actions call (recording a cycle, the utilisation read's idle "
        "spells) where there is no COPY; only actions import gpupool.bulk"
    ),
    ("gpupool/bulk.py", "_upsert_rows_elsewhere", "bulk_create"): (
        "the bulk insert-or-update that actions call (recording a cycle's explanations) where "
        "there is no COPY; only actions import gpupool.bulk"
    ),
    # The simulated cluster's storage is what etcd is to a Kubernetes cluster, not domain
    # state: the loop reaches it only through the ClusterBackend protocol, as it reaches a
    # real cluster, and records what it sees there through the domain's actions.
    ("gpupool/simcluster/store.py", "_write_object", "update_or_create"): (
        "stores one Kubernetes object of the simulated cluster (its etcd, not domain state)"
    ),
    ("gpupool/simcluster/store.py", "_write_state", "update"): (
        "moves the simulated cluster's revision counter and clock (its etcd, not domain state)"
    ),
    ("gpupool/simcluster/store.py", "_compact", "delete"): (
        "compacts the simulated cluster's tombstones, as etcd compacts (not domain state)"
    ),
    ("gpupool/simcluster/store.py", "_new_state", "create"): (
        "makes the simulated cluster's clock and revision counter (its etcd, not domain state)"
    ),
}


@dataclass(frozen=True)
class Write:
    """One write found: where, in which function, which method, on what."""

    path: str
    line: int
    function: str
    method: str
    receiver: str

    def key(self) -> tuple[str, str, str]:
        """How ``ALLOWED`` names this write."""
        return (self.path, self.function, self.method)


def reverse_accessors() -> frozenset[str]:
    """Names of the related managers the domain models get (``gpus``, ``quotas``, ...)."""
    names = set()
    for label in DOMAIN_APPS:
        for model in apps.get_app_config(label).get_models():
            for relation in model._meta.related_objects:
                accessor = relation.get_accessor_name()
                if accessor and not accessor.endswith("+"):
                    names.add(accessor)
            names.update(field.name for field in model._meta.many_to_many)
    return frozenset(names)


def _imports_django(tree: ast.Module) -> bool:
    """Whether a module imports Django or a domain app (and so may hold querysets)."""
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        for name in names:
            if name.startswith("django") or any(
                name.startswith(f"gpupool.{app}") for app in DOMAIN_APPS
            ):
                return True
    return False


def _mentions_queryset_type(annotation: ast.expr | None) -> bool:
    """Whether an annotation names a QuerySet or Manager (``QuerySet[Node]``, a string too)."""
    if annotation is None:
        return False
    text = ast.unparse(annotation)
    return any(name in text for name in QUERYSET_TYPES)


class _Walker(ast.NodeVisitor):
    """Collects the writes of one module, keeping the enclosing function and class."""

    def __init__(self, path: str, accessors: frozenset[str]) -> None:
        self.path = path
        self.accessors = accessors
        self.writes: list[Write] = []
        self.functions: list[str] = []
        self.classes: list[str] = []
        self.querysets: list[set[str]] = [set()]  # names bound to querysets, per scope

    # -- scopes

    def visit_Module(self, node: ast.Module) -> None:
        for statement in node.body:
            if isinstance(statement, ast.Assign) and self._is_queryset(
                statement.value, self.querysets[0]
            ):
                self.querysets[0].update(
                    target.id for target in statement.targets if isinstance(target, ast.Name)
                )
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        bound = set(self.querysets[-1])
        arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        bound.update(arg.arg for arg in arguments if _mentions_queryset_type(arg.annotation))
        for inner in ast.walk(node):
            if isinstance(inner, ast.Assign) and self._is_queryset(inner.value, bound):
                bound.update(t.id for t in inner.targets if isinstance(t, ast.Name))
            elif (
                isinstance(inner, ast.AnnAssign)
                and isinstance(inner.target, ast.Name)
                and (
                    _mentions_queryset_type(inner.annotation)
                    or (inner.value is not None and self._is_queryset(inner.value, bound))
                )
            ):
                bound.add(inner.target.id)
        self.functions.append(node.name)
        self.querysets.append(bound)
        self.generic_visit(node)
        self.querysets.pop()
        self.functions.pop()

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    # -- receivers

    def _is_queryset(self, node: ast.expr, bound: set[str]) -> bool:
        """Whether ``node`` is a manager or queryset: its chain passes a manager or a reverse
        accessor, or starts at a name bound to a queryset."""
        while True:
            if isinstance(node, ast.Call):
                node = node.func
            elif isinstance(node, ast.Subscript):
                node = node.value
            elif isinstance(node, ast.Attribute):
                if node.attr in MANAGERS or node.attr in self.accessors:
                    return True
                node = node.value
            elif isinstance(node, ast.Name):
                return node.id in bound
            else:
                return False

    def _is_models_own_save(self, call: ast.Call, method: str) -> bool:
        """``super().save()`` inside ``save`` (or delete in delete) of a class."""
        receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
        return (
            isinstance(receiver, ast.Call)
            and isinstance(receiver.func, ast.Name)
            and receiver.func.id == "super"
            and bool(self.classes)
            and bool(self.functions)
            and self.functions[-1] == method
        )

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Attribute):
            method = node.func.attr
            receiver = node.func.value
            uncommitted = any(
                keyword.arg == "commit"
                and isinstance(keyword.value, ast.Constant)
                and keyword.value.value is False
                for keyword in node.keywords
            )
            if method in WRITES_ON_ANYTHING:
                found = not (method == "save" and uncommitted) and not self._is_models_own_save(
                    node, method
                )
            elif method in WRITES_ON_QUERYSETS:
                found = self._is_queryset(receiver, self.querysets[-1])
            else:
                found = False
            if found:
                self.writes.append(
                    Write(
                        path=self.path,
                        line=node.lineno,
                        function=".".join(self.functions) or "<module>",
                        method=method,
                        receiver=ast.unparse(receiver),
                    )
                )
        self.generic_visit(node)


def parsed(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse``, once more if CPython 3.11 says "AST constructor recursion depth
    mismatch": its AST builder's depth counter is shared by the interpreter's threads
    (python/cpython#106905, fixed in 3.12), so a traceback another thread prints meanwhile
    (3.11's tracebacks parse source lines for their carets) can upset this parse."""
    try:
        return ast.parse(source, filename=filename)
    except SystemError as error:
        if "recursion depth mismatch" not in str(error):
            raise
        return ast.parse(source, filename=filename)


def writes_in(source: str, path: str, accessors: frozenset[str]) -> list[Write]:
    """The model writes in one module's source (``path`` as it is reported)."""
    tree = parsed(source)
    walker = _Walker(path, accessors if _imports_django(tree) else frozenset())
    walker.visit(tree)
    return walker.writes


def may_write(path: Path) -> bool:
    """Actions and migrations may write domain state (tests are outside ``gpupool/``)."""
    return path.name == "actions.py" or "migrations" in path.parts


def writes_outside_actions() -> list[Write]:
    """Every model write in ``gpupool/`` outside actions and migrations."""
    accessors = reverse_accessors()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if may_write(path):
            continue
        relative = path.relative_to(ROOT).as_posix()
        found.extend(writes_in(path.read_text(encoding="utf-8"), relative, accessors))
    return found


def test_no_module_outside_actions_writes_a_domain_model() -> None:
    unexpected = [write for write in writes_outside_actions() if write.key() not in ALLOWED]
    assert not unexpected, "write through an action in <app>/actions.py:\n" + "\n".join(
        f"  {w.path}:{w.line} in {w.function}(): {w.receiver}.{w.method}(...)" for w in unexpected
    )


def test_every_allowed_write_still_exists_and_says_why() -> None:
    present = {write.key() for write in writes_outside_actions()}
    assert set(ALLOWED) <= present, f"stale entries: {sorted(set(ALLOWED) - present)}"
    assert all(reason.strip() for reason in ALLOWED.values())


BAD_MODULE = """
from django.contrib import admin
from django.db.models import QuerySet

from gpupool.inventory.models import Gpu, Node


class NodeAdmin(admin.ModelAdmin):
    def cordon(self, request, queryset: QuerySet[Node]) -> None:
        queryset.update(cordoned=True)

    def save_model(self, request, obj, form, change):
        obj.save()


def add_node(flavor):
    return Node.objects.create(name="n1", flavor=flavor, cpu=1, memory_gb=1)


def break_first_gpu(node):
    node.gpus.filter(index=0).update(healthy=False)


def uncordon_all():
    nodes = Node.objects.filter(cordoned=True)
    nodes.update(cordoned=False)


def forget(node):
    node.delete()


def restock(rows):
    Gpu.objects.bulk_create(rows)
    Node.objects.get_or_create(name="n2")
"""

GOOD_MODULE = """
import hashlib

from django import forms
from django.db import models


class Node(models.Model):
    def save(self, *args, **kwargs):
        super().save(*args, **kwargs)


def tally(counts: dict, seen: set, rows, progress, bar, formset):
    counts.update(a=1)
    seen.update(rows)
    hashlib.sha256().update(b"x")
    progress.update(bar, completed=1)
    formset.save(commit=False)
    return {}.update(counts)
"""


def test_the_walk_finds_every_kind_of_write_in_a_bad_module() -> None:
    found = writes_in(BAD_MODULE, "bad.py", reverse_accessors())
    assert [(w.function, w.method, w.receiver) for w in found] == [
        ("cordon", "update", "queryset"),
        ("save_model", "save", "obj"),
        ("add_node", "create", "Node.objects"),
        ("break_first_gpu", "update", "node.gpus.filter(index=0)"),
        ("uncordon_all", "update", "nodes"),
        ("forget", "delete", "node"),
        ("restock", "bulk_create", "Gpu.objects"),
        ("restock", "get_or_create", "Node.objects"),
    ]


def test_the_walk_leaves_dicts_sets_hashes_forms_and_a_models_own_save_alone() -> None:
    assert writes_in(GOOD_MODULE, "good.py", reverse_accessors()) == []


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("gpupool/quotas/actions.py", True),
        ("gpupool/quotas/migrations/0001_initial.py", True),
        ("gpupool/quotas/admin.py", False),
        ("gpupool/cli/subcommands/seed_demo.py", False),
    ],
    ids=["an actions module", "a migration", "an admin module", "a command"],
)
def test_only_actions_and_migrations_may_write(path: str, allowed: bool) -> None:
    assert may_write(Path(path)) is allowed


def test_only_actions_use_the_bulk_inserts() -> None:
    """``gpupool.bulk`` writes rows; the walk above allows it because only actions call it."""
    importers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "actions.py" or "migrations" in path.parts or path.name == "bulk.py":
            continue
        tree = parsed(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            if "gpupool.bulk" in names:
                importers.append(str(path.relative_to(ROOT)))
    assert importers == []
