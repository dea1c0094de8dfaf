"""API of quota and budget requests: a lead files one, an admin sees its impact and decides.

One resource, ``/api/v1/quota-requests/``, for both kinds (``kind``: ``queue-quota`` or
``budget``), as the model and its state machine are one (``docs/governance.md`` says why).
Leads see and file their tenants' requests; admins see all and decide; finance reads
every tenant's and never decides (``access.REQUEST_READERS``); a draft is its requester's
alone until submitted. Every write calls an
action of ``quotas/actions.py``, which checks the rules, audits and sends the mails. The list
is also a CSV download (``?format=csv``: every request the filters and the caller's scope
keep, its amounts a column each), as the Requests and Approvals pages link it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import BaseRouter

from gpupool.api.access import ADMIN, LEAD, REQUEST_READERS, request_access
from gpupool.api.fields import NamedChoiceField, NameRelatedField
from gpupool.api.filters import NameFilter, NamesFilter
from gpupool.api.permissions import ADMINS, ActionRoles, TenantScoped
from gpupool.api.strict import StrictInput, refuse_a_body
from gpupool.api.tables import CSVExport
from gpupool.inventory.models import Flavor
from gpupool.quotas.actions import (
    approval_refusal,
    do_apply_quota_request,
    do_approve_and_apply_quota_request,
    do_create_quota_request,
    do_reject_quota_request,
    do_start_what_if,
    do_submit_quota_request,
    do_update_quota_request,
    do_withdraw_quota_request,
)
from gpupool.quotas.api import period_last_day_field
from gpupool.quotas.choices import CLOSED_STATES, QuotaRequestKind, QuotaRequestState
from gpupool.quotas.impact import request_impact
from gpupool.quotas.models import (
    BUDGET_KEYS,
    QUEUE_QUOTA_KEYS,
    PriorityClass,
    Queue,
    QuotaRequest,
    WhatIfRun,
    payload_texts,
)
from gpupool.quotas.queries import queues_led_by, quota_request_rows, visible_quota_requests
from gpupool.tenancy.models import Tenant

LEADS: frozenset[str] = frozenset({ADMIN, LEAD})


class LedQueues(NameRelatedField):
    """A queue by name, among the queues of tenants the caller leads (admins: every queue);
    another tenant's queue is unknown, as a 404 would say: a lead is told they lead no team
    owning a queue of that name, whether or not another team has one."""

    default_error_messages = {"not_led": "You lead no team that owns a queue named {value}."}

    def get_queryset(self) -> QuerySet[Queue]:
        """The queues the caller may ask quota for."""
        return queues_led_by(request_access(self.context["request"]))

    def fail(self, key: str, **kwargs: Any) -> Any:
        """As the shared field fails, except that a queue a lead does not lead is "not led"
        (an admin, who may ask for every queue, is told there is no such queue)."""
        if key == "does_not_exist" and not request_access(self.context["request"]).admin:
            key = "not_led"
        return super().fail(key, **kwargs)


class PayloadField(serializers.DictField):
    """A request's amounts, written as decimal strings however the request was stored
    (``quotas.models.payload_texts``: one filed before that holds JSON numbers)."""

    def to_representation(self, value: Any) -> Any:
        return payload_texts(super().to_representation(value))


class QuotaRequestSerializer(StrictInput, serializers.ModelSerializer[QuotaRequest]):
    """A request to change a queue's quota of a flavor (``payload``: the new ``guarantee``,
    ``deserved`` and ``capability`` in GPUs) or to add GPU-hours to a tenant's priority budget
    for a period (``payload``: ``gpu_hours``)."""

    tenant = NameRelatedField(
        slug_field="name",
        queryset=Tenant.objects.all(),
        required=False,
        help_text="The tenant asking; a queue-quota request defaults to its queue's tenant.",
    )
    queue = LedQueues(slug_field="name", required=False, allow_null=True)
    flavor = NameRelatedField(
        slug_field="name", queryset=Flavor.objects.all(), required=False, allow_null=True
    )
    priority_class = NameRelatedField(
        slug_field="name", queryset=PriorityClass.objects.all(), required=False, allow_null=True
    )
    payload = PayloadField(
        help_text='queue-quota: {"guarantee", "deserved", "capability"} (the new levels, in '
        'GPUs); budget: {"gpu_hours"} (added to the period\'s grant). Amounts are decimal '
        'strings, as every GPU amount of the API ("36", "12.5"); a JSON number is taken and '
        "stored as one."
    )
    requested_by: serializers.SlugRelatedField[Any] = NameRelatedField(
        slug_field="username", read_only=True
    )
    decided_by: serializers.SlugRelatedField[Any] = NameRelatedField(
        slug_field="username",
        read_only=True,
        allow_null=True,
        help_text="The admin who approved or rejected it; null until decided.",
    )
    period_last_day = period_last_day_field(allow_null=True)
    summary = serializers.CharField(read_only=True)
    submit = serializers.BooleanField(
        write_only=True,
        default=False,
        help_text="Submit at once instead of keeping a draft (on create only).",
    )

    class Meta:
        model = QuotaRequest
        fields: tuple[str, ...] = (
            "id",
            "kind",
            "state",
            "tenant",
            "queue",
            "flavor",
            "priority_class",
            "period_start",
            "period_end",
            "period_last_day",
            "payload",
            "justification",
            "summary",
            "requested_by",
            "created_at",
            "submitted_at",
            "decided_by",
            "decided_at",
            "decision_note",
            "applied_at",
            "withdrawn_at",
            "submit",
        )
        read_only_fields = (
            "id",
            "state",
            "created_at",
            "submitted_at",
            "decided_at",
            "decision_note",
            "applied_at",
            "withdrawn_at",
        )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Shapes only (the actions check the rules): the tenant is known, a queue-quota
        request has no period (quota is a standing entitlement), and on a change the kind,
        tenant and submit flag stay as they are."""
        kind = attrs.get("kind", getattr(self.instance, "kind", None))
        if self.instance is not None:
            fixed = [name for name in ("kind", "tenant") if name in attrs]
            if fixed:
                raise serializers.ValidationError(
                    dict.fromkeys(fixed, "cannot be changed; file a new request")
                )
            if self.initial_data.get("submit"):
                raise serializers.ValidationError(
                    {"submit": "a draft is submitted with POST .../submit/"}
                )
        elif "tenant" not in attrs:
            queue = attrs.get("queue")
            if kind != QuotaRequestKind.QUEUE_QUOTA or queue is None or queue.tenant is None:
                raise serializers.ValidationError({"tenant": "name the tenant that asks"})
            attrs["tenant"] = queue.tenant
        if kind == QuotaRequestKind.QUEUE_QUOTA:
            for name in ("period_start", "period_end"):
                if attrs.get(name) is not None:
                    raise serializers.ValidationError(
                        {name: "a queue-quota request has no period: quota stands until changed"}
                    )
        return attrs


class QuotaRequestDetailSerializer(QuotaRequestSerializer):
    """A request as its detail shows it (``GET .../<id>/``, and the answers to filing, changing
    and submitting it): with the verdict the approval page gives, so a lead learns at once
    that a request could never be approved as things stand (``quotas.actions.approval_refusal``,
    the fit part of ``decision_refusal``). Not in the list, where it would cost a fit check a
    row."""

    approvable = serializers.SerializerMethodField(
        help_text="Whether an admin could approve it as things stand (its change fits the "
        "pool); null once it is decided."
    )
    approval_refusal = serializers.SerializerMethodField(
        help_text="Why an admin could not approve it as things stand, as the approval would "
        "say; null when it could, or once it is decided."
    )

    class Meta(QuotaRequestSerializer.Meta):
        fields = (*QuotaRequestSerializer.Meta.fields, "approvable", "approval_refusal")

    def _refusal(self, request: QuotaRequest) -> str | None:
        """``approval_refusal``'s sentence for an open request ("" when it would fit)."""
        if request.state not in (QuotaRequestState.DRAFT, QuotaRequestState.SUBMITTED):
            return None
        refusal = approval_refusal(request)
        return "" if refusal is None else " ".join(refusal.messages)

    def get_approvable(self, request: QuotaRequest) -> bool | None:
        """True or False for a draft or a submitted request; null once decided."""
        refusal = self._refusal(request)
        return None if refusal is None else refusal == ""

    def get_approval_refusal(self, request: QuotaRequest) -> str | None:
        """The approval's refusal, or null."""
        return self._refusal(request) or None


class PayloadAmountField(serializers.Field[Any, Any, Any, Any]):
    """One amount of a request's ``payload`` (``key``), as the JSON writes it
    (``payload_texts``); null where the request's kind asks none."""

    def __init__(self, key: str, **kwargs: Any) -> None:
        self.key = key
        super().__init__(source="payload", read_only=True, **kwargs)

    def to_representation(self, value: Any) -> Any:
        texts = payload_texts(value)
        return texts.get(self.key) if isinstance(texts, dict) else None


# The amounts a request's payload holds, by kind, a CSV column each.
PAYLOAD_COLUMNS = (*QUEUE_QUOTA_KEYS, *BUDGET_KEYS)


class QuotaRequestRowSerializer(QuotaRequestSerializer):
    """A request as a row of the CSV (``?format=csv``): the list's fields, its ``payload`` an
    amount a column (``guarantee``, ``deserved`` and ``capability`` of a queue-quota request,
    ``gpu_hours`` of a budget one: ``PAYLOAD_COLUMNS``; empty where its kind asks none), so a
    spreadsheet reads and sums them; nothing a request is filed with only (``submit``)."""

    guarantee = PayloadAmountField("guarantee")
    deserved = PayloadAmountField("deserved")
    capability = PayloadAmountField("capability")
    gpu_hours = PayloadAmountField("gpu_hours")

    class Meta(QuotaRequestSerializer.Meta):
        fields = tuple(
            column
            for name in QuotaRequestSerializer.Meta.fields
            if name != "submit"
            for column in (PAYLOAD_COLUMNS if name == "payload" else (name,))
        )


class DecisionSerializer(StrictInput, serializers.Serializer[Any]):
    """An admin's comment on approving or rejecting a request (required to reject)."""

    decision_note = serializers.CharField(allow_blank=True, default="", max_length=10_000)


class ShareChangeSerializer(serializers.Serializer[Any]):
    """One queue's deserved share of a flavor, before and after the change, in GPUs."""

    queue = serializers.CharField()
    tenant = serializers.CharField(allow_null=True)
    flavor = serializers.CharField()
    before = serializers.FloatField()
    after = serializers.FloatField()
    change = serializers.FloatField()


class WhatIfRunSerializer(serializers.ModelSerializer[WhatIfRun]):
    """A what-if replay of a request's change: its state and progress while it runs, then its
    result (pool and per-tenant figures today and with the change, and each tenant's change
    in waits) or why it failed."""

    started_by: serializers.SlugRelatedField[Any] = NameRelatedField(
        slug_field="username", read_only=True
    )
    result = serializers.JSONField(read_only=True, allow_null=True)

    class Meta:
        model = WhatIfRun
        fields = (
            "id",
            "request",
            "state",
            "days",
            "progress",
            "message",
            "result",
            "error",
            "started_by",
            "created_at",
            "started_at",
            "finished_at",
        )
        read_only_fields = fields


class WhatIfStartSerializer(StrictInput, serializers.Serializer[Any]):
    """How many days of recorded demand to replay."""

    days = serializers.IntegerField(min_value=1, max_value=90, default=30)


class ImpactSerializer(serializers.Serializer[Any]):
    """What approving a request would do: whether it fits (and why not), the amounts now,
    asked and after, the pool's healthy GPUs and guarantees, and the deserved shares it
    moves. Of a request no longer open (``closed_as``), what became of it: the amounts now,
    and no fit, "after" or share change."""

    request = serializers.IntegerField()
    kind = NamedChoiceField(choices=QuotaRequestKind.choices)
    closed_as = serializers.ChoiceField(
        choices=[(state.value, state.label) for state in CLOSED_STATES],
        allow_null=True,
        help_text="What became of a request no longer open: `applied` (its change was made: "
        "`current` includes it, unless it was changed since), `rejected` or `withdrawn` (its "
        "change was never made: `current` is as it is now). Such a request is not approved "
        "again, so `fits` and `after` are null, `problems` and `deserved_shares` empty and "
        "`pool` has no `pool_guarantees_after`. Null while the request is open (draft, "
        "submitted, approved and not yet applied).",
    )
    fits = serializers.BooleanField(
        allow_null=True,
        help_text="Whether approving it breaks no rule (else `problems` says why); null for a "
        "request no longer open (`closed_as`).",
    )
    problems = serializers.ListField(child=serializers.CharField())
    current = serializers.DictField(child=serializers.CharField(), allow_null=True)
    requested = serializers.DictField(child=serializers.CharField())
    after = serializers.DictField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="The quota's levels, or the budget's granted `gpu_hours`, once it is "
        "approved; null for a request no longer open (`closed_as`): an applied request's "
        "change is in `current` already.",
    )
    pool = serializers.DictField(child=serializers.CharField())
    deserved_shares = ShareChangeSerializer(
        many=True,
        help_text="Every queue whose deserved share of the flavor the change moves; empty "
        "for a budget request, and for one that cannot be approved as it stands.",
    )
    deserved_shares_error = serializers.CharField(
        allow_null=True,
        help_text="Why no deserved share is given: the request cannot be approved as it "
        "stands (its problems, naming the field and the guarantee the queue can hold), or "
        "the pool cannot be read; null when the shares are given.",
    )
    notes = serializers.ListField(
        child=serializers.CharField(),
        help_text="What else approving it would mean, though it fits: a raise of deserved that "
        "the parent's deserved quota absorbs (its children's would total more), with the "
        "queue's real deserved share.",
    )
    what_if = WhatIfRunSerializer(allow_null=True, help_text="The latest what-if run, if any.")


class QuotaRequestFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter requests by state, kind, tenant, queue, flavor, class and requester (several
    states or tenants: the parameter repeated, ``tenant=nlp&tenant=vision``). A name that
    names nothing is a 400 naming its filter ("No tenant named nosuch."), as the same name is
    in a request's body, not an empty list that reads as "no requests" (``NameFilter``,
    ``NamesFilter``)."""

    tenant = NamesFilter(field_name="tenant__name", names=Tenant)
    queue = NameFilter(field_name="queue__name", names=Queue)
    flavor = NameFilter(field_name="flavor__name", names=Flavor)
    priority_class = NameFilter(field_name="priority_class__name", names=PriorityClass)
    requested_by = NameFilter(
        field_name="requested_by__username", names=settings.AUTH_USER_MODEL, name_field="username"
    )
    state = filters.MultipleChoiceFilter(choices=QuotaRequestState.choices)

    class Meta:
        model = QuotaRequest
        fields = ("state", "kind", "tenant", "queue", "flavor", "priority_class", "requested_by")


class QuotaRequestViewSet(
    CSVExport,
    TenantScoped,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[QuotaRequest],
):
    """Quota and budget requests: leads file, change, submit and withdraw their tenants'
    requests (``DELETE`` deletes a draft; ``POST .../withdraw/`` keeps a submitted one,
    withdrawn); admins see every request, its impact and a what-if
    replay, and approve (which applies) or reject; finance reads every tenant's requests
    (list and detail) and changes none. The list as CSV with ``?format=csv``, every request
    the filters keep (``QuotaRequestRowSerializer``)."""

    queryset = quota_request_rows()
    serializer_class = QuotaRequestSerializer
    filterset_class = QuotaRequestFilter
    # ``last_step_at``: when each took its latest step (``quotas.queries.last_step_at``).
    ordering_fields = ("created_at", "submitted_at", "decided_at", "last_step_at", "id")
    permission_classes = (ActionRoles,)
    default_roles = LEADS
    action_roles = {
        "list": REQUEST_READERS,
        "retrieve": REQUEST_READERS,
        "approve": ADMINS,
        "reject": ADMINS,
        "apply": ADMINS,
        "impact": ADMINS,
        "what_if": ADMINS,
    }
    tenant_field = "tenant"
    http_method_names = ("get", "post", "patch", "delete", "head", "options")
    # The actions whose answer is one open request, with the approval's verdict on it.
    detail_actions = frozenset({"retrieve", "create", "partial_update", "submit"})
    csv_name = "quota-requests"

    def get_serializer_class(self) -> type[QuotaRequestSerializer]:
        """The detail's serializer (``approvable``, ``approval_refusal``) for one request; the
        CSV's rows (the payload's amounts a column each) for the list asked as CSV."""
        if self.action in self.detail_actions:
            return QuotaRequestDetailSerializer
        if self.wants_csv():
            return QuotaRequestRowSerializer
        return QuotaRequestSerializer

    def scope(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """Requests of the tenants the caller leads (admins and finance: all); a member who
        leads no tenant of the request does not see it, nor anyone but its requester a
        draft."""
        return visible_quota_requests(queryset, self.access())

    def perform_create(self, serializer: QuotaRequestSerializer) -> None:  # type: ignore[override]
        """File the request through the action (a draft, or submitted with ``submit``)."""
        data = dict(serializer.validated_data)
        serializer.instance = do_create_quota_request(
            kind=data["kind"],
            tenant=data["tenant"],
            requested_by=self.request.user,
            justification=data.get("justification", ""),
            payload=data["payload"],
            queue=data.get("queue"),
            flavor=data.get("flavor"),
            priority_class=data.get("priority_class"),
            period_start=data.get("period_start"),
            period_end=data.get("period_end"),
            submit=data.get("submit", False),
        )

    def perform_update(self, serializer: QuotaRequestSerializer) -> None:  # type: ignore[override]
        """Change a draft through the action (its requester only)."""
        request = serializer.instance
        assert request is not None
        changes = {k: v for k, v in serializer.validated_data.items() if k != "submit"}
        serializer.instance = do_update_quota_request(
            request, acting_user=self.request.user, **changes
        )

    def perform_destroy(self, instance: QuotaRequest) -> None:
        """Withdraw a draft through the action, which deletes it (its requester only;
        audited). A submitted request is kept when withdrawn, so it is not deleted: that is
        ``POST .../withdraw/``."""
        if instance.state == QuotaRequestState.SUBMITTED:
            raise DjangoValidationError(
                {
                    "state": f"request #{instance.pk} is submitted: withdraw it with POST "
                    f"quota-requests/{instance.pk}/withdraw/ (it is kept, withdrawn; only a "
                    "draft is deleted)"
                }
            )
        do_withdraw_quota_request(instance, acting_user=self.request.user)

    def _answer(self, request: QuotaRequest) -> Response:
        return Response(self.get_serializer(request).data)

    @extend_schema(request=None, responses={200: QuotaRequestDetailSerializer})
    @action(detail=True, methods=["post"])
    def submit(self, request: Request, pk: str | None = None) -> Response:
        """Send a draft to the admins (its requester only)."""
        refuse_a_body(request.data)
        return self._answer(do_submit_quota_request(self.get_object(), acting_user=request.user))

    @extend_schema(request=None, responses={200: QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def withdraw(self, request: Request, pk: str | None = None) -> Response:
        """Withdraw a submitted request before an admin decides it (its requester only): it
        is kept, ``withdrawn``, no longer open, and can no longer be decided. A draft is
        withdrawn with ``DELETE`` (it is deleted)."""
        refuse_a_body(request.data)
        quota_request = self.get_object()
        if quota_request.state == QuotaRequestState.DRAFT:
            raise DjangoValidationError(
                {
                    "state": f"request #{quota_request.pk} is a draft: withdraw it with DELETE "
                    f"quota-requests/{quota_request.pk}/ (a draft is deleted)"
                }
            )
        withdrawn = do_withdraw_quota_request(quota_request, acting_user=request.user)
        assert withdrawn is not None  # only a draft is deleted
        return self._answer(withdrawn)

    @extend_schema(request=DecisionSerializer, responses={200: QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        """Approve a submitted request and apply its change, atomically (admins; never one's
        own request)."""
        form = DecisionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        return self._answer(
            do_approve_and_apply_quota_request(
                self.get_object(),
                acting_user=request.user,
                note=form.validated_data["decision_note"],
            )
        )

    @extend_schema(request=DecisionSerializer, responses={200: QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str | None = None) -> Response:
        """Reject a submitted request, saying why in ``decision_note`` (admins; never one's
        own request)."""
        form = DecisionSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        return self._answer(
            do_reject_quota_request(
                self.get_object(),
                acting_user=request.user,
                note=form.validated_data["decision_note"],
            )
        )

    @extend_schema(request=None, responses={200: QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def apply(self, request: Request, pk: str | None = None) -> Response:
        """Make the change of a request approved without it (in the admin site)."""
        refuse_a_body(request.data)
        return self._answer(do_apply_quota_request(self.get_object(), acting_user=request.user))

    @extend_schema(responses={200: ImpactSerializer})
    @action(detail=True, methods=["get"])
    def impact(self, request: Request, pk: str | None = None) -> Response:
        """Whether the request fits the pool and its guarantees, and whose deserved shares
        it moves by how much (admins)."""
        quota_request = self.get_object()
        impact = request_impact(quota_request).to_json()
        return Response(ImpactSerializer(impact | {"what_if": quota_request.latest_what_if()}).data)

    @extend_schema(methods=["GET"], request=None, responses={200: WhatIfRunSerializer})
    @extend_schema(
        methods=["POST"], request=WhatIfStartSerializer, responses={202: WhatIfRunSerializer}
    )
    @action(detail=True, methods=["get", "post"], url_path="what-if")
    def what_if(self, request: Request, pk: str | None = None) -> Response:
        """GET: the latest what-if replay of the request's change, to poll while it runs (404
        before the first). POST: start one over the last ``days`` days (admins; before the
        decision; one at a time; only of a change that fits, else 400 naming ``payload`` with
        the impact's problems), in the background."""
        quota_request = self.get_object()
        if request.method == "POST":
            form = WhatIfStartSerializer(data=request.data)
            form.is_valid(raise_exception=True)
            run = do_start_what_if(
                quota_request, acting_user=request.user, days=form.validated_data["days"]
            )
            return Response(WhatIfRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)
        latest = quota_request.latest_what_if()
        if latest is None:
            raise NotFound(f"no what-if run of request {quota_request.pk} yet; POST to start one")
        return Response(WhatIfRunSerializer(latest).data)


def register(router: BaseRouter) -> None:
    """Add the requests resource to the API router."""
    router.register("quota-requests", QuotaRequestViewSet, basename="quota-request")
