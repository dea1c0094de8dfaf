"""Forms of the dashboard's pages. They check shapes only; the actions they feed check the
rules (as the API's serializers do), and a refusal comes back onto the form's fields."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import capfirst
from rest_framework import serializers

from gpupool.accounting.reports import span_refusal
from gpupool.api.errors import SELF_NAMING_FIELDS, self_naming_fields
from gpupool.clusters.grouping import MAX_PODS
from gpupool.inventory.api import NODE_REASON_MAX_LENGTH
from gpupool.inventory.choices import Sharing
from gpupool.inventory.models import UNHEALTHY_REASON_MAX_LENGTH, Flavor
from gpupool.number_formats import plain_number
from gpupool.quotas.actions import PROBLEM_FIELD_WORDS
from gpupool.quotas.choices import QuotaRequestKind
from gpupool.quotas.levels import levels_out_of_order
from gpupool.quotas.models import (
    PAYLOAD_LIMITS,
    QUEUE_QUOTA_KEYS,
    PriorityClass,
    Queue,
    QuotaRequest,
)
from gpupool.scheduler.types import MILLI
from gpupool.tenancy.models import Tenant
from gpupool.workloads.actions import (
    MAX_EXPECTED_RUNTIME_S,
    PodSetSpec,
    pod_set_spec_errors,
)
from gpupool.workloads.api import NAME_PATTERN, NOT_A_DNS_LABEL, WorkloadInputSerializer
from gpupool.workloads.choices import Topology


def amount(key: str, label: str, unit: str, **options: Any) -> forms.DecimalField:
    """An optional requested amount of at least 0, bounded as a request's payload holds it
    (``PAYLOAD_LIMITS``: its largest value and decimal places), refused once, in the product's
    words and the pages' number format ("at most 99,999,999.999 GPU-hours"), not Django's
    ("Ensure that there are no more than 12 digits in total.", which named neither the bound
    nor the unit)."""
    largest, places = PAYLOAD_LIMITS[key]
    messages = {
        "max_value": f"at most {plain_number(largest, places)} {unit}",
        "max_decimal_places": f"at most {places} decimal places",
    }
    return forms.DecimalField(
        required=False,
        label=label,
        min_value=options.pop("min_value", Decimal(0)),
        max_value=largest,
        decimal_places=places,
        error_messages=messages | options.pop("error_messages", {}),
        **options,
    )


class GroupBoundField(forms.BoundField):
    """A field whose widget is a group of inputs (radios) that the page writes in a group of
    its own, not in Django's fieldset: each input is described by the field's help and error
    list as a single input is (``BoundField.aria_describedby``: "<auto_id>_helptext",
    "<auto_id>_error"; Django leaves that to the fieldset it would write), so a screen reader
    reads why the choice was refused with each radio, as it does for the other fields
    (``templates/dashboard/partials/field.html``)."""

    def build_widget_attrs(
        self, attrs: dict[str, Any], widget: forms.Widget | None = None
    ) -> dict[str, Any]:
        """Django's attributes, with ``aria-describedby`` on each input of the group."""
        built: dict[str, Any] = super().build_widget_attrs(attrs, widget)
        if not built.get("aria-describedby") and (described := self.aria_describedby):
            built["aria-describedby"] = described
        return built


class GroupChoiceField(forms.ChoiceField):
    """A choice written as a group of radios, each described by the field's help and error
    list (``GroupBoundField``)."""

    def get_bound_field(self, form: forms.BaseForm, field_name: str) -> forms.BoundField:
        """The field on ``form`` as ``GroupBoundField`` writes it."""
        return GroupBoundField(form, self, field_name)


class AlsoDescribedBoundField(forms.BoundField):
    """A field that an element of the page beside it describes too (``AlsoDescribed``): its
    id is added to the ids Django's ``aria-describedby`` names (the help, the error list)."""

    def build_widget_attrs(
        self, attrs: dict[str, Any], widget: forms.Widget | None = None
    ) -> dict[str, Any]:
        """Django's attributes, with the page's element added to ``aria-describedby``."""
        built: dict[str, Any] = super().build_widget_attrs(attrs, widget)
        also = getattr(self.field, "also_described_by", "")
        built["aria-describedby"] = " ".join(filter(None, (built.get("aria-describedby"), also)))
        return built


class AlsoDescribedCharField(forms.CharField):
    """A text field that the page's element ``also_described_by`` (an id) describes too."""

    def __init__(self, *args: Any, also_described_by: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.also_described_by = also_described_by

    def get_bound_field(self, form: forms.BaseForm, field_name: str) -> forms.BoundField:
        """The field on ``form`` as ``AlsoDescribedBoundField`` writes it."""
        return AlsoDescribedBoundField(form, self, field_name)


class QuickSelect(forms.Select):
    """A select written in Python: Django's renders each option through its own template,
    which for an admin's 379 queues cost about 15 ms of a My workloads page (B5), and as
    much again on the Requests page with its 200 teams. Same markup: the attributes, then
    an ``<option>`` per choice, the value's selected."""

    def render(
        self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None
    ) -> SafeString:
        chosen = {str(v) for v in self.format_value(value)}
        options = format_html_join(
            "",
            '<option value="{}"{}>{}</option>',
            (
                (option, mark_safe(" selected") if str(option) in chosen else "", label)
                for option, label in self.choices
            ),
        )
        return format_html(
            '<select name="{}"{}>{}</select>',
            name,
            flatatt(self.build_attrs(self.attrs, attrs)),
            options,
        )


def refusal_fields(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """A refusal's messages by the dotted field they name (``pod_sets.0.gpus``; "" for none):
    a DRF serializer's nested errors, or a Django ``message_dict`` (whose keys are dotted
    already); ``non_field_errors`` and ``__all__`` name no field."""
    found: dict[str, list[str]] = {}
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            inner = "" if key in ("non_field_errors", NON_FIELD_ERRORS) else f"{prefix}{key}."
            for name, messages in refusal_fields(value, inner or prefix).items():
                found.setdefault(name, []).extend(messages)
    elif isinstance(detail, list) and detail and all(isinstance(i, Mapping) for i in detail):
        for index, item in enumerate(detail):
            for name, messages in refusal_fields(item, f"{prefix}{index}.").items():
                found.setdefault(name, []).extend(messages)
    else:
        items = detail if isinstance(detail, list) else [detail]
        if items:
            found[prefix.rstrip(".")] = [str(item) for item in items]
    return found


# Fields of the actions' refusals that a page holds no field of, in words (``readable_field``):
# a quota request's ``payload`` is what it asks for. A field whose sentence names what it is
# about itself (``state``: an action's refusal of a step in its state says the state in its
# own sentence) is said as nothing, as the API's message says it (``SELF_NAMING_FIELDS``).
FIELD_WORDS = {"payload": "requested amounts", **dict.fromkeys(SELF_NAMING_FIELDS, "")}


def readable_field(path: str) -> str:
    """A refusal's dotted field path (``refusal_fields``) in words, for a page that shows no
    field of that name: ``FIELD_WORDS``' words, each name's underscores as spaces and an index
    counted from 1 (``pod_sets.1.node_selector`` is "pod sets #2 node selector")."""
    return " ".join(
        f"#{int(part) + 1}" if part.isdigit() else FIELD_WORDS.get(part, part.replace("_", " "))
        for part in path.split(".")
        if part
    )


def refusal_lines(detail: Any, label: Callable[[str], str] = readable_field) -> list[str]:
    """A refusal (a serializer's nested errors, a ``message_dict``, a list of messages) as
    lines of "field: why", each field named by ``label`` (a form's label; "" names none)."""
    return [
        f"{label(name)}: {message}" if name and label(name) else message
        for name, messages in refusal_fields(detail).items()
        for message in messages
    ]


def form_problem_lines(form: forms.BaseForm) -> list[str]:
    """A form's errors as lines of "<field>: why" (``refusal_lines``), each field named by its
    label as the page shows it (``field_label``); an error of the whole form as it is."""
    return refusal_lines(form.errors, label=lambda name: field_label(form, name))


def form_problems(form: forms.BaseForm) -> str:
    """A form's errors in one line for a page's message (``form_problem_lines``)."""
    return "; ".join(form_problem_lines(form))


def field_label(form: forms.BaseForm, name: str) -> str:
    """How a page names ``form``'s field ``name`` in an error: by its label ("Days to
    replay", not ``days``); a refusal's field the form has not, in words (``readable_field``:
    ``payload`` is the requested amounts)."""
    return str(form[name].label) if name in form.fields else readable_field(name)


def refusal_detail(refusal: ValidationError | PermissionDenied) -> Any:
    """What an action's refusal says, for ``refusal_fields``: a ``ValidationError``'s
    ``message_dict`` (or its messages, when it names no field), the messages of a field said
    without its name (``api.errors.self_naming_fields``: "the change would not fit: ...") as
    naming none, as the API's message says them; a ``PermissionDenied``'s sentence."""
    if not isinstance(refusal, ValidationError):
        return str(refusal) or "not allowed"
    if not hasattr(refusal, "error_dict"):
        return refusal.messages
    unnamed = self_naming_fields(refusal)
    detail: dict[str, list[str]] = {}
    for field, messages in refusal.message_dict.items():
        detail.setdefault(NON_FIELD_ERRORS if field in unnamed else field, []).extend(messages)
    return detail


class QuotaRequestForm(forms.Form):
    """A lead's request: a queue's new quota of a flavor, or GPU-hours added to a budget."""

    kind = GroupChoiceField(
        choices=QuotaRequestKind.choices, widget=forms.RadioSelect, label="What to ask for"
    )
    queue = forms.ModelChoiceField(
        queryset=Queue.objects.none(), required=False, widget=QuickSelect
    )
    flavor = forms.ModelChoiceField(queryset=Flavor.objects.all(), required=False)
    # The flavor is chosen on the same form: a MIG flavor's levels count its MIG instances.
    guarantee = amount("guarantee", "Guarantee (GPUs or MIG instances)", "GPUs or MIG instances")
    deserved = amount("deserved", "Deserved (GPUs or MIG instances)", "GPUs or MIG instances")
    capability = amount("capability", "Capability (GPUs or MIG instances)", "GPUs or MIG instances")
    tenant = forms.ModelChoiceField(
        queryset=Tenant.objects.none(), required=False, label="Team", widget=QuickSelect
    )
    priority_class = forms.ModelChoiceField(
        queryset=PriorityClass.objects.filter(budget_rate__gt=0),
        required=False,
        label="Priority class",
    )
    period_start = forms.DateField(
        required=False, widget=forms.DateInput(attrs={"type": "date"}), label="Period from"
    )
    period_end = forms.DateField(
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}),
        label="Period until (not included)",
    )
    # More than 0: a grant of 0 changes nothing (``quotas.actions.no_change_refusal`` refuses
    # it); the smallest amount a request holds (``PAYLOAD_LIMITS``) is the field's minimum.
    gpu_hours = amount(
        "gpu_hours",
        "GPU-hours to add",
        "GPU-hours",
        min_value=Decimal(1).scaleb(-PAYLOAD_LIMITS["gpu_hours"][1]),
        error_messages={"min_value": "add more than 0 GPU-hours"},
    )
    justification = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Why the team needs it: the admins read this first.",
    )

    def __init__(
        self,
        *args: Any,
        queues: Iterable[Queue] = (),
        tenants: Iterable[Tenant] = (),
        draft: QuotaRequest | None = None,
        **kwargs: Any,
    ) -> None:
        if draft is not None:
            kwargs["initial"] = self.initial_of(draft) | kwargs.get("initial", {})
        super().__init__(*args, **kwargs)
        if draft is not None:
            # What a draft's requester may not change (``REQUEST_DRAFT_FIELDS``): its kind
            # and its team; the fields show them, and a posted value is ignored.
            self.fields["kind"].disabled = True
            self.fields["tenant"].disabled = True
        queue_field = self.fields["queue"]
        tenant_field = self.fields["tenant"]
        assert isinstance(queue_field, forms.ModelChoiceField)
        assert isinstance(tenant_field, forms.ModelChoiceField)
        queue_field.queryset = Queue.objects.filter(pk__in=[q.pk for q in queues]).order_by("name")
        tenant_field.queryset = Tenant.objects.filter(pk__in=[t.pk for t in tenants]).order_by(
            "name"
        )

    def clean(self) -> dict[str, Any]:
        """The fields of the chosen kind are all there; a queue quota's levels in order
        (``quotas.levels``), every pair out of order said at once beside its lower level in
        the form's words ("Guarantee (10) must not exceed Deserved (5)"), with a pointer to it
        beside the higher one when that has no error of its own."""
        data = super().clean() or {}
        kind = data.get("kind")
        needed: tuple[str, ...]
        if kind == QuotaRequestKind.QUEUE_QUOTA:
            needed = ("queue", "flavor", *QUEUE_QUOTA_KEYS)
        elif kind == QuotaRequestKind.BUDGET:
            needed = ("tenant", "priority_class", "period_start", "period_end", "gpu_hours")
        else:
            needed = ()
        for name in needed:
            # A value given but not understood has its own error already: one is enough.
            if data.get(name) in (None, "") and name not in self.errors:
                self.add_error(name, "needed for this kind of request")
        if kind == QuotaRequestKind.QUEUE_QUOTA:
            levels = {key: data.get(key) for key in QUEUE_QUOTA_KEYS if key not in self.errors}
            out_of_order = levels_out_of_order(levels, words=self.level_word)
            for found in out_of_order:
                self.add_error(found.low, found.message)
            for found in out_of_order:
                if found.high not in self.errors:
                    self.add_error(found.high, self.pointer_to(found.low))
        return data

    def level_word(self, key: str) -> str:
        """A quota level as the form names it in a sentence: its label without its unit
        ("Guarantee")."""
        return str(self.fields[key].label).split(" (", 1)[0]

    def pointer_to(self, key: str) -> str:
        """What a field an error beside ``key`` names says: where to look."""
        return f"see the error under {self.fields[key].label}"

    @staticmethod
    def initial_of(draft: QuotaRequest) -> dict[str, Any]:
        """The form's fields as ``draft`` has them, to change it with the same form."""
        amounts = draft.payload if isinstance(draft.payload, dict) else {}
        return {
            "kind": draft.kind,
            "queue": draft.queue_id,
            "flavor": draft.flavor_id,
            "tenant": draft.tenant_id,
            "priority_class": draft.priority_class_id,
            "period_start": draft.period_start,
            "period_end": draft.period_end,
            "justification": draft.justification,
        } | {key: amounts[key] for key in (*QUEUE_QUOTA_KEYS, "gpu_hours") if key in amounts}

    def changes(self) -> dict[str, Any]:
        """The draft's fields as ``do_update_quota_request`` takes them: the target, period,
        amounts and justification of the form's kind (the other kind's left empty)."""
        data = self.cleaned_data
        is_quota = data["kind"] == QuotaRequestKind.QUEUE_QUOTA
        return {
            "queue": data["queue"] if is_quota else None,
            "flavor": data["flavor"] if is_quota else None,
            "priority_class": None if is_quota else data["priority_class"],
            "period_start": None if is_quota else data["period_start"],
            "period_end": None if is_quota else data["period_end"],
            "payload": self.payload(),
            "justification": data["justification"],
        }

    def payload(self) -> dict[str, str]:
        """The request's amounts as the action takes them (decimal strings)."""
        data = self.cleaned_data
        keys = QUEUE_QUOTA_KEYS if data["kind"] == QuotaRequestKind.QUEUE_QUOTA else ("gpu_hours",)
        return {key: str(data[key]) for key in keys}

    def add_refusal(self, refusal: ValidationError) -> None:
        """Put an action's refusal on the fields it names (``payload``'s on the amount each
        names, ``_add_payload_refusal``); what names no field of this form, a refusal that
        names no field at all included (a plain ``ValidationError("...")``,
        ``refusal_detail``), goes on the form."""
        amount_fields = (
            QUEUE_QUOTA_KEYS
            if self.cleaned_data.get("kind") == QuotaRequestKind.QUEUE_QUOTA
            else ("gpu_hours",)
        )
        for name, found in refusal_fields(refusal_detail(refusal)).items():
            messages = [in_label_words(message) for message in found]
            if name == "payload":
                self._add_payload_refusal(found, amount_fields)
            elif name in self.fields:
                self.add_error(name, messages)
            else:
                self.add_error(None, refusal_lines({name: messages} if name else messages))

    def _add_payload_refusal(self, found: list[str], amount_fields: tuple[str, ...]) -> None:
        """Put each refusal of the requested amounts beside the amount it is about: the one
        its message starts with (``capability must be at most ...``; several joined with
        "; ", as a flavor's whole-number rule writes them, each apart), with a pointer to it
        beside each other amount it names (``guarantee (12) must not exceed deserved (10)``);
        the only amount of a budget request takes all. One about the whole request (``these
        are the queue's levels already ...``) goes on the form."""
        pointed: set[str] = set()
        for message in found:
            for part in payload_parts(message):
                named = [key for key in _AMOUNT_KEY.findall(part) if key in amount_fields]
                starts = _AMOUNT_KEY.match(part)
                if starts is not None and starts[1] in amount_fields:
                    field = starts[1]
                elif len(amount_fields) == 1:
                    field = amount_fields[0]
                else:
                    self.add_error(None, refusal_lines({"payload": [in_label_words(part)]}))
                    continue
                self.add_error(field, in_label_words(part))
                for other in dict.fromkeys(named):
                    if other != field and other not in pointed:
                        pointed.add(other)
                        self.add_error(other, self.pointer_to(field))


# The requested amounts' keys, as a refusal of a request's ``payload`` names them.
_AMOUNT_KEY = re.compile(r"\b(" + "|".join((*QUEUE_QUOTA_KEYS, "gpu_hours")) + r")\b")


def payload_parts(message: str) -> list[str]:
    """A refusal of a request's amounts, split where several were joined with "; ", each
    about an amount it starts with (a flavor's whole-number rule, ``whole_gpu_errors``);
    one that is not so joined (``the change would not fit: a; b``) stays whole."""
    parts = message.split("; ")
    if len(parts) > 1 and all(_AMOUNT_KEY.match(part) for part in parts):
        return parts
    return [message]


# A request's field names, as an action's refusal writes them (``period_end``, ``gpu_hours``).
_REQUEST_FIELD_NAMES = re.compile(r"\b(" + "|".join(PROBLEM_FIELD_WORDS) + r")\b")


def in_label_words(message: str) -> str:
    """An action's refusal of a request with its field names as the form's labels read
    (``quotas.actions.PROBLEM_FIELD_WORDS``): "period_end (2026-12-01) must be after
    period_start (2026-12-10)" reads "Period until (2026-12-01) must be after period from
    (2026-12-10)" (capitalised when it starts with one)."""
    worded = _REQUEST_FIELD_NAMES.sub(lambda match: PROBLEM_FIELD_WORDS[match[1]], message)
    return capfirst(worded) if worded != message and _REQUEST_FIELD_NAMES.match(message) else worded


class RequestActionForm(forms.Form):
    """A form of a step on a quota request (decide, replay in a what-if) whose action's
    refusal comes back onto it (``add_refusal``)."""

    def add_refusal(self, refusal: ValidationError | PermissionDenied) -> None:
        """Put the action's refusal beside the field it names (``decision_note`` on the
        Comment), the request's field names in its messages as the forms' labels read them
        (``in_label_words``); what names no field of this form goes on the form, its field in
        words (``readable_field``: ``payload`` is the requested amounts)."""
        for name, found in refusal_fields(refusal_detail(refusal)).items():
            messages = [in_label_words(message) for message in found]
            if name in self.fields:
                self.add_error(name, messages)
            else:
                self.add_error(None, refusal_lines({name: messages} if name else messages))


class DecisionForm(RequestActionForm):
    """An admin's decision on a submitted request, with a comment (required to reject)."""

    # Its buttons are the field (Approve and apply, Reject): a decision posted without one
    # of them is refused in their words.
    decision = forms.ChoiceField(
        choices=[("approve", "Approve"), ("reject", "Reject")],
        error_messages={
            "required": "press Approve and apply or Reject",
            "invalid_choice": "press Approve and apply or Reject",
        },
    )
    decision_note = forms.CharField(
        required=False,
        max_length=10_000,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Comment",
        help_text="Sent to the requester. Required to reject.",
    )


class WhatIfForm(RequestActionForm):
    """How many days of recorded demand a what-if replays."""

    days = forms.IntegerField(min_value=1, max_value=90, initial=30, label="Days to replay")


class CordonForm(forms.Form):
    """Cordon or uncordon a node, saying why (kept in the audit log)."""

    cordoned = forms.BooleanField(required=False)
    # (The pages' label: "Why (optional, kept in the audit log)", "Why cordon n2".)
    reason = forms.CharField(required=False, max_length=NODE_REASON_MAX_LENGTH, label="Why")


class GpuHealthForm(forms.Form):
    """Mark one GPU of a node healthy or unhealthy; unhealthy says why."""

    index = forms.IntegerField(min_value=0, label="GPU")
    healthy = forms.BooleanField(required=False)
    reason = forms.CharField(
        required=False, max_length=UNHEALTHY_REASON_MAX_LENGTH, label="Unhealthy because"
    )

    def clean(self) -> dict[str, Any]:
        """Marking a GPU unhealthy needs a reason (the action says so too); a reason already
        refused (too long) is not also missing."""
        data = super().clean() or {}
        refused = "reason" in self.errors
        if not data.get("healthy") and not refused and not (data.get("reason") or "").strip():
            self.add_error("reason", "say why the GPU is unhealthy")
        return data


class AuditFilterForm(forms.Form):
    """Filters of the audit log: people or the system (the loop's budget flushes and the
    cluster sync outnumber people's changes by far), actor, action, object type and a span
    of days (in the viewer's zone)."""

    MADE_BY = (("", "anyone"), ("people", "people"), ("system", "the system"))

    made_by = forms.ChoiceField(required=False, choices=MADE_BY, label="Made by")
    actor = forms.CharField(required=False, label="Actor (username, or system)")
    action = forms.ChoiceField(required=False)
    object_type = forms.ChoiceField(required=False, label="Object type")
    # A day filters by its start and the next day's, in the viewer's zone (hours off UTC):
    # the calendar's first and last days have no day before or after them to reach.
    FIRST_DAY = date.min + timedelta(days=1)
    LAST_DAY = date.max - timedelta(days=1)
    DAYS = {"type": "date", "min": FIRST_DAY.isoformat(), "max": LAST_DAY.isoformat()}

    since = forms.DateField(required=False, widget=forms.DateInput(attrs=DAYS), label="From")
    until = forms.DateField(
        required=False, widget=forms.DateInput(attrs=DAYS), label="Until (included)"
    )

    def __init__(
        self, *args: Any, actions: Iterable[str] = (), object_types: Iterable[str] = (), **kw: Any
    ) -> None:
        super().__init__(*args, **kw)
        action_field = self.fields["action"]
        type_field = self.fields["object_type"]
        assert isinstance(action_field, forms.ChoiceField)
        assert isinstance(type_field, forms.ChoiceField)
        action_field.choices = [("", "any"), *((name, name) for name in actions)]
        type_field.choices = [("", "any"), *((name, name) for name in object_types)]

    def clean(self) -> dict[str, Any]:
        """Each day is one whose start and end can be written as moments (``FIRST_DAY`` to
        ``LAST_DAY``), and the span is ordered."""
        data = super().clean() or {}
        for name in ("since", "until"):
            day: date | None = data.get(name)
            if day is not None and not self.FIRST_DAY <= day <= self.LAST_DAY:
                self.add_error(
                    name,
                    f"{day.isoformat()} is out of range: pick a day from "
                    f"{self.FIRST_DAY.isoformat()} to {self.LAST_DAY.isoformat()}.",
                )
        since: date | None = data.get("since")
        until: date | None = data.get("until")
        if since and until and until < since:
            self.add_error("until", "must not be before From")
        return data


class CostRangeForm(forms.Form):
    """The Cost page's custom span: its first and last accounting days (``?start=&end=``, the
    reports API's parameters, both included). The span is the reports' (``span_refusal``, the
    API's rule: an end before the start, more than ``LONGEST_SPAN_DAYS``), inside the days the
    page counts (``first`` to ``last``: its trend of months before the end stays inside the
    calendar)."""

    start = forms.DateField(
        label="Start",
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"required": "give the first day too (YYYY-MM-DD)"},
    )
    end = forms.DateField(
        label="End (included)",
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"required": "give the last day too (YYYY-MM-DD)"},
    )

    def __init__(self, *args: Any, first: date, last: date, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.first, self.last = first, last
        for field in self.fields.values():
            field.widget.attrs |= {"min": first.isoformat(), "max": last.isoformat()}

    def clean(self) -> dict[str, Any]:
        """Each day inside the days the page counts, and the span one a report covers."""
        data = super().clean() or {}
        for name in ("start", "end"):
            day: date | None = data.get(name)
            if day is not None and not self.first <= day <= self.last:
                self.add_error(
                    name,
                    f"{day.isoformat()} is out of range: pick a day from "
                    f"{self.first.isoformat()} to {self.last.isoformat()}.",
                )
        start: date | None = data.get("start")
        end: date | None = data.get("end")
        if start and end and not self.errors:
            for name, why in span_refusal(start, end).items():
                self.add_error(name, why)
        return data


def api_field(name: str) -> serializers.Field[Any, Any, Any, Any]:
    """The workloads API's input field ``name`` (``WorkloadInputSerializer``'s), to read a
    form's value by the API's own rule and words."""
    return WorkloadInputSerializer().fields[name]


class WorkloadForm(forms.Form):
    """A workload of one pod set to submit, or to try first (the live dry-run), in the shape
    the workloads API takes (``WorkloadForm.body``); the API's serializer and the submission
    action check the rest."""

    # The API's rule, here too: refused with the form's other problems, not after them.
    name = forms.RegexField(
        regex=NAME_PATTERN,
        max_length=63,
        required=False,
        error_messages=NOT_A_DNS_LABEL,
        help_text="A DNS label, unique in the namespace (a dry-run may leave it out).",
    )
    queue = forms.ChoiceField(widget=QuickSelect)
    priority_class = forms.ModelChoiceField(
        queryset=PriorityClass.objects.order_by("-value", "name"),
        to_field_name="name",
        required=False,
        empty_label="the pool's default class",
        label="Priority class",
    )
    flavor = forms.ModelChoiceField(
        queryset=Flavor.objects.order_by("name"), to_field_name="name", label="GPU flavor"
    )
    pods = forms.IntegerField(min_value=1, max_value=MAX_PODS, initial=1)
    # No bound of its own: the submission's rule (``clean``) says the flavor's largest node,
    # or past it the core's bound, whatever the number, as the API does.
    gpus_per_pod = forms.IntegerField(
        min_value=0,
        initial=1,
        label="GPUs per pod (MIG: instances)",
        help_text="At most the largest node of the flavor holds (a pod runs on one node); "
        "0 for pods that need no GPU.",
    )
    gpu_milli = forms.IntegerField(
        min_value=1,
        max_value=MILLI,
        required=False,
        label="GPU share per pod (milli-GPU)",
        help_text="Shared flavors only, and needed there: the fraction of one GPU each pod gets, "
        "in thousandths (1 to 1000; 250 is a quarter of a GPU), with 1 GPU per pod.",
    )
    topology = forms.ChoiceField(choices=Topology.choices, required=False, label="NVLink")
    # At most the API's bound (``workloads.actions.MAX_EXPECTED_RUNTIME_S``), in hours.
    MAX_EXPECTED_HOURS = MAX_EXPECTED_RUNTIME_S // 3600
    expected_hours = forms.DecimalField(
        min_value=Decimal("0.01"),
        max_value=Decimal(MAX_EXPECTED_HOURS),
        decimal_places=2,  # no max_digits: the bound says why once ("at most 8784 hours")
        required=False,
        label="Expected runtime (hours)",
        help_text=f"Helps everyone's start estimates; at most {MAX_EXPECTED_HOURS} (366 days).",
        error_messages={
            "max_value": f"at most {MAX_EXPECTED_HOURS} hours (366 days): the longest runtime "
            "gpupool reads from a pod's annotation"
        },
    )
    # The API's field, in its unit and words (its help text): text here, read by the API's
    # own field (``clean_protected_runtime_s``), so that what it refuses is refused in its
    # words with the form's other problems; the queue's free maximum is the submission's
    # rule (``Workload.rule_errors``), which comes back beside the field (``BODY_FIELDS``).
    # The chosen queue's default and free maximum are said beside it, by the page
    # (``views.submit_protection``, ``partials/protected_limits.html``).
    protected_runtime_s = AlsoDescribedCharField(
        also_described_by="protected-runtime-limits",
        required=False,
        label="Protected runtime (seconds)",
        widget=forms.TextInput(attrs={"inputmode": "numeric"}),
        help_text=api_field("protected_runtime_s").help_text or "",
    )
    image = forms.CharField(max_length=512, initial="python:3.12", label="Container image")

    def __init__(self, *args: Any, queues: Iterable[str] = (), **kwargs: Any) -> None:
        """``queues``: the names of the queues the user may submit to; the only one is
        chosen already."""
        super().__init__(*args, **kwargs)
        names = list(queues)
        queue_field = self.fields["queue"]
        assert isinstance(queue_field, forms.ChoiceField)
        queue_field.choices = [("", "---------"), *((name, name) for name in names)]
        if len(names) == 1:
            queue_field.initial = names[0]

    def clean_protected_runtime_s(self) -> int | None:
        """The protected runtime as the API reads it (its serializer's own field: whole
        seconds, 0 or more), or None for the queue's default."""
        typed = self.cleaned_data.get("protected_runtime_s") or ""
        if not typed:
            return None
        try:
            seconds: int = api_field("protected_runtime_s").run_validation(typed)
        except serializers.ValidationError as refusal:
            raise ValidationError([str(message) for message in refusal.detail]) from None
        return seconds

    def shared_flavors(self) -> list[str]:
        """The names of the flavors whose pods ask a GPU share (``gpu_milli``), for the page
        to show the share's field only when one of them is chosen (the action's rule,
        ``PodSet.clean``, decides: required on these, refused on the others)."""
        flavor_field = self.fields["flavor"]
        assert isinstance(flavor_field, forms.ModelChoiceField)
        offered = flavor_field.queryset
        assert offered is not None
        return list(offered.filter(sharing=Sharing.SHARED).values_list("name", flat=True))

    # The submission rule's pod set fields, as this form names them.
    POD_SET_FIELDS = {"count": "pods", "gpus": "gpus_per_pod", "flavor": "flavor"}
    # The fields of the API's body and of the submission action's refusals (a pod set's
    # ``pod_sets.<index>.<field>``; this form's one pod set is index 0), as this form names
    # them; ``pod_sets`` alone is the bound on pods in all. Others name no field here.
    BODY_FIELDS = {
        "name": "name",
        "queue": "queue",
        "priority_class": "priority_class",
        "topology": "topology",
        "expected_runtime_s": "expected_hours",
        "protected_runtime_s": "protected_runtime_s",
        "pod_sets": "pods",
        **{f"pod_sets.0.{key}": name for key, name in POD_SET_FIELDS.items()},
        "pod_sets.0.image": "image",
        "pod_sets.0.gpu_milli": "gpu_milli",
    }

    def clean(self) -> dict[str, Any]:
        """A pod set that could never run is refused on its field, by the submission's own
        rule (``workloads.actions.pod_set_spec_errors``), with the form's other problems;
        where it has none, the submission action says it, with its own refusals (a name
        taken, ...), as the API does: a form wrong in both is told both at once."""
        data = super().clean() or {}
        readable = all(data.get(name) is not None for name in self.POD_SET_FIELDS.values())
        if self.errors and readable:
            spec = PodSetSpec(count=data["pods"], gpus=data["gpus_per_pod"], flavor=data["flavor"])
            for name, why in pod_set_spec_errors(spec).items():
                self.add_error(self.POD_SET_FIELDS.get(name), why)
        return data

    def refusal_label(self, key: str) -> str:
        """How this form names a refusal's field (a body path, ``refusal_fields``): by the
        label of the form's field it is (``BODY_FIELDS``), else in words (``readable_field``)."""
        field = self.BODY_FIELDS.get(key)
        return str(self[field].label) if field is not None else readable_field(key)

    def add_refusal(self, detail: Any) -> None:
        """Put a refusal of the API's serializer (its nested ``errors``) or of the submission
        action (a ``ValidationError``'s ``message_dict``) beside the fields it names
        (``BODY_FIELDS``); what names no field of this form goes on the form, its field in
        words (``readable_field``)."""
        for key, messages in refusal_fields(detail).items():
            field = self.BODY_FIELDS.get(key)
            if field is not None:
                self.add_error(field, messages)
            else:
                self.add_error(None, refusal_lines({key: messages} if key else messages))

    def body(self) -> dict[str, Any]:
        """The cleaned form as the workloads API's request body."""
        data = self.cleaned_data
        hours = data.get("expected_hours")
        body: dict[str, Any] = {
            "queue": data["queue"],
            "topology": data.get("topology") or "",
            "pod_sets": [
                {
                    "count": data["pods"],
                    "gpus": data["gpus_per_pod"],
                    "flavor": data["flavor"].name,
                    "image": data["image"],
                }
            ],
        }
        if data.get("gpu_milli") is not None:
            body["pod_sets"][0]["gpu_milli"] = data["gpu_milli"]
        if data.get("name"):
            body["name"] = data["name"]
        if data.get("priority_class") is not None:
            body["priority_class"] = data["priority_class"].name
        if hours is not None:
            body["expected_runtime_s"] = round(hours * 3600)
        if data.get("protected_runtime_s") is not None:
            body["protected_runtime_s"] = data["protected_runtime_s"]
        return body
