"""Writing audit events. Every action that changes audited state calls ``record_audit_event``
inside its transaction, so the change and its audit row commit or roll back together."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, TypeVar

from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models, transaction
from django.db.models import ProtectedError

from gpupool.audit.models import AuditEvent
from gpupool.audit.stamps import pool_time
from gpupool.bulk import insert_values

M = TypeVar("M", bound=models.Model)


def model_snapshot(instance: models.Model, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The instance's concrete field values as JSON-safe data (foreign keys as their ids)."""
    skipped = set(exclude)
    data: dict[str, Any] = {}
    for field in instance._meta.concrete_fields:
        if field.name in skipped:
            continue
        value = field.value_from_object(instance)
        if isinstance(field, models.DecimalField) and value is not None:
            # 2 and 2.000 are one value: write it at the field's scale, as the database holds it.
            value = Decimal(value).quantize(Decimal(1).scaleb(-(field.decimal_places or 0)))
        data[field.attname] = value
    # Round-trip through JSON so Decimal, date and datetime compare equal to what is stored.
    result: dict[str, Any] = json.loads(json.dumps(data, cls=DjangoJSONEncoder))
    return result


def snapshot_fields(model: type[models.Model], exclude: Iterable[str] = ()) -> tuple[str, ...]:
    """The attnames ``model_snapshot`` writes for ``model`` (read them with ``values``)."""
    skipped = set(exclude)
    return tuple(f.attname for f in model._meta.concrete_fields if f.name not in skipped)


def values_snapshots(
    model: type[models.Model], rows: Iterable[Mapping[str, Any]], exclude: Iterable[str] = ()
) -> list[dict[str, Any]]:
    """``model_snapshot`` of each row read as values (by attname, ``snapshot_fields``), the
    same dicts without a model instance each and with one JSON round trip for all of them
    (the loop's budget moves audit hundreds of budgets a cycle)."""
    skipped = set(exclude)
    fields = [f for f in model._meta.concrete_fields if f.name not in skipped]
    scales = {
        f.attname: Decimal(1).scaleb(-(f.decimal_places or 0))
        for f in fields
        if isinstance(f, models.DecimalField)
    }
    data = []
    for row in rows:
        values = {f.attname: row[f.attname] for f in fields}
        for name, scale in scales.items():
            if values[name] is not None:
                values[name] = Decimal(values[name]).quantize(scale)
        data.append(values)
    result: list[dict[str, Any]] = json.loads(json.dumps(data, cls=DjangoJSONEncoder))
    return result


def record_system_audit_events(
    action: str,
    entries: Iterable[tuple[models.Model, dict[str, Any] | None, dict[str, Any] | None, str]],
    *,
    at: Any = None,
) -> int:
    """Write one audit row per (instance, before, after, reason) of ``entries``, all made by
    the system (the control loop) for ``action``, at once (``bulk.insert_values``: by
    ``COPY`` on PostgreSQL, no model instance per row); ``at`` defaults to the pool's clock
    (``audit.stamps.pool_time``), as every audit row's. Returns how
    many. For a cycle's hundreds of rows, where ``record_audit_event`` writes one."""
    return record_system_audit_rows(
        action,
        (
            (instance._meta.label_lower, str(instance.pk), str(instance), before, after, reason)
            for instance, before, after, reason in entries
        ),
        at=at,
    )


def record_system_audit_rows(
    action: str,
    entries: Iterable[tuple[str, str, str, dict[str, Any] | None, dict[str, Any] | None, str]],
    *,
    at: Any = None,
) -> int:
    """``record_system_audit_events`` for objects not read as model instances: each entry is
    (object type as ``app_label.model``, object id, its ``str``, before, after, reason)."""
    when = at if at is not None else pool_time()
    return insert_values(
        AuditEvent,
        ("actor_id", "actor_name", "at", "action", "object_type", "object_id", "object_repr",
         "before", "after", "reason"),
        (
            (None, "", when, action, object_type, object_id, object_repr[:200], before, after,
             reason)
            for object_type, object_id, object_repr, before, after, reason in entries
        ),
    )  # fmt: skip


def _actor_of(user: Any) -> Any:
    """The user to store as actor: None for the system or an anonymous user."""
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return user


def record_audit_event(
    *,
    acting_user: Any,
    action: str,
    instance: models.Model,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    reason: str = "",
) -> AuditEvent:
    """Write one audit row for a change to ``instance`` made by ``acting_user``, stamped with
    the pool's clock (``control.clock.pool_now``) as the records the action changes are: a
    simulated cluster runs ahead of the wall clock (the demo), and a request "decided at
    16:00" was audited at 09:37. On a real cluster it is the wall clock."""
    actor = _actor_of(acting_user)
    return AuditEvent.objects.create(
        at=pool_time(),
        actor=actor,
        actor_name=actor.get_username() if actor is not None else "",
        action=action,
        object_type=instance._meta.label_lower,
        object_id=str(instance.pk),
        object_repr=str(instance)[:200],
        before=before,
        after=after,
        reason=reason,
    )


def record_audit_change(
    *,
    acting_user: Any,
    action: str,
    instance: models.Model,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    reason: str = "",
) -> AuditEvent | None:
    """Write an audit row only when ``before`` and ``after`` differ (saving unchanged is silent)."""
    if before == after:
        return None
    return record_audit_event(
        acting_user=acting_user,
        action=action,
        instance=instance,
        before=before,
        after=after,
        reason=reason,
    )


@contextmanager
def audited_change(
    instance: M,
    *,
    action: str,
    acting_user: Any,
    reason: str = "",
    snapshot: Callable[[M], dict[str, Any]] = model_snapshot,
) -> Iterator[M]:
    """Record what the block changes on ``instance``: its row is locked and read first, then
    ``snapshot`` of it before and after is audited (no row when equal; none if the block fails).

    ``instance`` without a primary key is a creation: ``before`` is empty.
    """
    with transaction.atomic():
        stored = (
            type(instance)._default_manager.select_for_update().filter(pk=instance.pk).first()
            if instance.pk is not None
            else None
        )
        before = snapshot(stored) if stored is not None else None
        yield instance
        record_audit_change(
            acting_user=acting_user,
            action=action,
            instance=instance,
            before=before,
            after=snapshot(instance),
            reason=reason,
        )


def save_audited(
    instance: M,
    *,
    action: str,
    acting_user: Any,
    reason: str = "",
    snapshot: Callable[[M], dict[str, Any]] = model_snapshot,
) -> M:
    """Validate (``full_clean``) and save ``instance``, auditing the change: the body of every
    action that creates or edits one row."""
    with audited_change(
        instance, action=action, acting_user=acting_user, reason=reason, snapshot=snapshot
    ):
        instance.full_clean()
        instance.save()
    return instance


def delete_audited(
    instance: models.Model,
    *,
    action: str,
    acting_user: Any,
    reason: str = "",
    snapshot: Callable[[Any], dict[str, Any]] = model_snapshot,
) -> None:
    """Delete ``instance``, auditing its last state (``before``; ``after`` is empty). Rows that
    protect it refuse the delete with a ValidationError naming them."""
    with transaction.atomic():
        record_audit_event(
            acting_user=acting_user,
            action=action,
            instance=instance,
            before=snapshot(instance),
            after=None,
            reason=reason,
        )
        try:
            instance.delete()
        except ProtectedError as error:
            users = sorted({str(row._meta.verbose_name_plural) for row in error.protected_objects})
            raise ValidationError(f"{instance} is still used by {', '.join(users)}") from error
