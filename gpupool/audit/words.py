"""The audit log in words, for the pages: what each action did ("approved a quota request"),
what kind of object it changed ("quota request"), and each recorded field's label ("decided
by"), from the names the actions record (``AuditEvent.action``, ``object_type`` and the
snapshots' keys). ``ACTION_LABELS`` is the one place an action's name gets its words: every
action name the code records has one (a test reads the ``action=`` names of the code)."""

from __future__ import annotations

import re
from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import models

# What each recorded action did, said as a past-tense phrase after who did it ("ada approved
# a quota request"; "system synced a node from the cluster").
ACTION_LABELS: dict[str, str] = {
    "api.issue_token": "issued an API token",
    "control.grow_workload": "grew an elastic gang into free capacity",
    "control.idle_alerts": "alerted on idle workloads",
    "control.load_pool": "loaded a whole pool",
    "control.register_workloads": "registered workloads made outside gpupool",
    "inventory.add_nodes": "added nodes",
    "inventory.delete_flavor": "deleted a GPU flavor",
    "inventory.drain_node": "started draining a node",
    "inventory.end_drain": "ended a node's drain",
    "inventory.record_drained": "recorded a node as drained",
    "inventory.save_flavor": "saved a GPU flavor",
    "inventory.set_gpu_health": "marked a GPU's health",
    "inventory.set_node_cordoned": "cordoned or uncordoned a node",
    "inventory.sync_node": "synced a node from the cluster",
    "notifications.set_preference": "set mail preferences",
    "quotas.apply_quota_request": "applied a quota request",
    "quotas.approve_quota_request": "approved a quota request",
    "quotas.create_quota_request": "filed a quota request",
    "quotas.cycle_budget": "moved a budget's GPU-hours at a scheduling cycle",
    "quotas.delete_priority_class": "deleted a priority class",
    "quotas.delete_queue": "deleted a queue",
    "quotas.delete_queue_quota": "deleted a queue's quota",
    "quotas.grant_budget": "granted a budget",
    "quotas.reject_quota_request": "rejected a quota request",
    "quotas.reserve_budget": "reserved GPU-hours of a budget",
    "quotas.save_priority_class": "saved a priority class",
    "quotas.save_queue": "saved a queue",
    "quotas.set_queue_quota": "set a queue's quota",
    "quotas.settle_budget": "settled a budget's reservation",
    "quotas.spend_budget": "spent GPU-hours of a budget",
    "quotas.start_what_if": "started a what-if replay",
    "quotas.submit_quota_request": "submitted a quota request",
    "quotas.update_quota_request": "changed a quota request",
    "quotas.withdraw_quota_request": "withdrew a quota request",
    "tenancy.delete_tenant": "deleted a team",
    "tenancy.grant_site_role": "granted a site role",
    "tenancy.remove_membership": "removed a team member",
    "tenancy.revoke_site_role": "revoked a site role",
    "tenancy.save_tenant": "saved a team",
    "tenancy.set_membership": "set a team membership",
}

# Kinds of object the pages name otherwise than the model's verbose name.
KIND_WORDS: dict[str, str] = {
    "tenancy.tenant": "team",
    "tenancy.membership": "team membership",
    "inventory.flavor": "GPU flavor",
    "quotas.whatifrun": "what-if run",  # as the approval page and the action's words say it
}

# Snapshot keys that are no field of the model (``_budget_snapshot``, ``_node_snapshot``,
# ``_drain_snapshot``, the control loop's rows ...).
KEY_WORDS: dict[str, str] = {
    "remaining_gpu_hours": "GPU-hours remaining",
    "at": "when, on the pool's clock",
    "drain_requested": "drain requested",
    "unhealthy_gpus": "unhealthy GPUs",
    "token": "API token",
}

# Words the pages write otherwise than a name's lower-case parts ("gpu hours": "GPU-hours").
_WORD_FIXES = (
    (re.compile(r"\bgpu[ _-]hours\b"), "GPU-hours"),
    (re.compile(r"\bgpus\b"), "GPUs"),
    (re.compile(r"\bgpu\b"), "GPU"),
    (re.compile(r"\bcpu\b"), "CPU"),
    (re.compile(r"\bgb\b"), "GB"),
    (re.compile(r"\bapi\b"), "API"),
    (re.compile(r"\bnvlink\b"), "NVLink"),
    (re.compile(r"\bmig\b"), "MIG"),
)


def in_words(name: str) -> str:
    """A code name as words: ``remaining_gpu_hours`` is "remaining GPU-hours"."""
    words = name.replace("_", " ").replace(".", " ").strip()
    for pattern, replacement in _WORD_FIXES:
        words = pattern.sub(replacement, words)
    return words


def action_label(action: str) -> str:
    """What ``action`` did, in words ("approved a quota request"); a name the code does not
    record (a test's, an older release's) reads by its parts ("test: early-second")."""
    if action in ACTION_LABELS:
        return ACTION_LABELS[action]
    app, _, verb = action.partition(".")
    return f"{in_words(app)}: {in_words(verb)}" if verb else in_words(action)


def audited_model(object_type: str) -> type[models.Model] | None:
    """The model of an ``app_label.model`` object type, or None if no installed app has it."""
    try:
        return apps.get_model(object_type)
    except (LookupError, ValueError):
        return None


def object_kind(object_type: str) -> str:
    """What kind of object ``object_type`` (``app_label.model``) is, in words: "quota
    request", "team", "node"."""
    if object_type in KIND_WORDS:
        return KIND_WORDS[object_type]
    model = audited_model(object_type)
    if model is None:
        return in_words(object_type.rpartition(".")[2])
    return in_words(str(model._meta.verbose_name))


def model_fields(object_type: str) -> dict[str, models.Field[Any, Any]]:
    """The concrete fields of ``object_type``'s model by the names snapshots write (attnames:
    ``decided_by_id``); empty for a type no installed app has."""
    model = audited_model(object_type)
    if model is None:
        return {}
    return {field.attname: field for field in model._meta.concrete_fields}


def field_label(object_type: str, key: str) -> str:
    """A recorded field's label: the model field's verbose name ("decided by"), else the
    pages' words for the snapshot's own keys ("GPU-hours remaining"), else its name in words."""
    if key in KEY_WORDS:
        return KEY_WORDS[key]
    field = model_fields(object_type).get(key)
    if field is not None:
        return in_words(str(field.verbose_name))
    return in_words(key.removesuffix("_id"))


def names_a_user(object_type: str, key: str) -> bool:
    """Whether the recorded ``key`` holds a user's id (``decided_by_id``, ``user_id``)."""
    field = model_fields(object_type).get(key)
    if field is not None and field.is_relation:
        related = field.related_model
        return isinstance(related, type) and related._meta.label == settings.AUTH_USER_MODEL
    return key.endswith("_by_id")
