"""API of quotas: the queue tree with its quotas and what each queue holds, borrows and lends
now; priority classes; budgets with their ledger. Every role reads queues and classes (the
pool's public state, at the queue level); a tenant's lead and members and finance read its
budgets. Admins change all of them through the quotas actions. (Quota and budget *requests*
are ``requests_api.py``'s.)
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.db.models import QuerySet
from django_filters import rest_framework as filters
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.routers import BaseRouter

from gpupool.api.fields import NameRelatedField
from gpupool.api.filters import NameFilter, NamesFilter, UtcDateTimeFilter
from gpupool.api.permissions import ADMINS, EVERYONE, ActionRoles, TenantScoped, tenant_scoped
from gpupool.api.rows import PlannedRows
from gpupool.api.strict import StrictInput
from gpupool.api.tables import CSVExport
from gpupool.inventory.models import Flavor
from gpupool.quotas.actions import (
    do_delete_priority_class,
    do_delete_queue,
    do_delete_queue_quota,
    do_grant_budget,
    do_save_priority_class,
    do_save_queue,
    do_set_queue_quota,
)
from gpupool.quotas.choices import LedgerEntryKind
from gpupool.quotas.models import BudgetLedgerEntry, PriorityBudget, PriorityClass, Queue, covering
from gpupool.quotas.queries import (
    QueueUsage,
    budget_rows,
    children_of,
    queue_rows,
    queue_usage,
    quota_rows,
)
from gpupool.tenancy.models import Tenant


def gpus_field(**options: Any) -> serializers.DecimalField:
    """An amount of GPUs (fractional for shared flavors), as quotas store them."""
    return serializers.DecimalField(max_digits=10, decimal_places=3, **options)


def period_last_day_field(*, allow_null: bool = False) -> serializers.DateField:
    """A budget's period's last day, included (the model's ``period_last_day``): what the
    pages show as its end, beside ``period_end``, which stays the first day after it
    (``allow_null``: a queue-quota request has no period)."""
    return serializers.DateField(
        read_only=True,
        allow_null=allow_null,
        help_text="The period's last day, included: the day before period_end (the first day "
        'after the period), as the pages show the period ("2026-12-01 to 2026-12-31 '
        '(included)")' + ("; null without a period." if allow_null else "."),
    )


# ----------------------------------------------------------------------------- queues


class QuotaRowSerializer(PlannedRows, serializers.Serializer[Any]):
    """A queue's quota of one flavor and what it holds of it now (GPUs)."""

    flavor = serializers.CharField()
    guarantee = gpus_field(allow_null=True, help_text="Never lent.")
    deserved = gpus_field(allow_null=True, help_text="Its fair share.")
    capability = gpus_field(allow_null=True, help_text="Its hard cap.")
    allocated = gpus_field(allow_null=True, help_text="Held now by its subtree's running work.")
    borrowed = gpus_field(allow_null=True, help_text="Allocated above its deserved share.")
    lent = gpus_field(allow_null=True, help_text="Its deserved share that other queues use now.")


# Where a queue serializer's context keeps the one serializer of its quota rows.
QUOTA_ROWS = "quota_row_serializer"


class QueueSerializer(StrictInput, PlannedRows, serializers.ModelSerializer[Queue]):
    """A queue of the tree: parent and children, tenant, weight, lending and protection
    limits, its quotas with what it holds, borrows and lends now, and its queue lengths."""

    # (declared fields leave the class, so this "parent" does not hide Field.parent)
    parent: serializers.SlugRelatedField[Queue] = NameRelatedField(  # type: ignore[assignment]
        slug_field="name",
        queryset=Queue.objects.all(),
        required=False,
        allow_null=True,
        help_text="Empty for the root, which stands for the pool.",
    )
    tenant: serializers.SlugRelatedField[Tenant] = NameRelatedField(
        slug_field="name", queryset=Tenant.objects.all(), required=False, allow_null=True
    )
    children = serializers.SerializerMethodField()
    leaf = serializers.SerializerMethodField()
    quotas = serializers.SerializerMethodField()
    pending_workloads = serializers.IntegerField(read_only=True, default=0)
    placed_workloads = serializers.IntegerField(
        read_only=True, default=0, help_text="Admitted or running."
    )
    usage_cycle = serializers.SerializerMethodField()

    class Meta:
        model = Queue
        fields = (
            "name",
            "parent",
            "children",
            "leaf",
            "tenant",
            "weight",
            "reclaimable",
            "lending_limit",
            "default_protected_runtime_s",
            "max_protected_runtime_s",
            "idle_alert_after_s",
            "idle_reclaim_after_s",
            "description",
            "quotas",
            "pending_workloads",
            "placed_workloads",
            "usage_cycle",
        )

    def _usage(self) -> QueueUsage:
        usage = self.context.get("usage")
        if usage is None:
            usage = self.context["usage"] = queue_usage()
        return usage

    def get_children(self, queue: Queue) -> list[str]:
        """The names of its child queues."""
        return sorted(child.name for child in children_of(queue))

    def get_leaf(self, queue: Queue) -> bool:
        """Whether it receives workloads (has no children)."""
        return not children_of(queue)

    @extend_schema_field(QuotaRowSerializer(many=True))
    def get_quotas(self, queue: Queue) -> list[dict[str, Any]]:
        """Per flavor: its quota and what it holds, borrows and lends now. One row
        serializer serves every queue of a list: a serializer builds its fields anew for
        each instance, half the CPU of a page of 100 queues (B5's year)."""
        rows: QuotaRowSerializer | None = self.context.get(QUOTA_ROWS)
        if rows is None:
            rows = self.context[QUOTA_ROWS] = QuotaRowSerializer()
        return [rows.to_representation(row) for row in quota_rows(queue, self._usage())]

    @extend_schema_field(serializers.IntegerField(allow_null=True))
    def get_usage_cycle(self, queue: Queue) -> int | None:
        """The scheduling cycle whose view of the pool the usage figures come from."""
        return self._usage().cycle_id


class QueueFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter queues by tenant, parent and whether they are leaves (a tenant or parent that
    names nothing is a 400 naming it: ``NameFilter``)."""

    tenant = NameFilter(field_name="tenant__name", names=Tenant)
    parent = NameFilter(
        method="filter_parent",
        names=Queue,
        besides=("null",),
        help_text="The parent queue's name; null: the root (a queue without a parent). A "
        "name that names no queue is a 400.",
    )
    leaf = filters.BooleanFilter(field_name="children", lookup_expr="isnull", distinct=True)

    class Meta:
        model = Queue
        fields = ("tenant", "parent", "leaf")

    def filter_parent(self, queryset: Any, name: str, value: str) -> Any:
        """Children of the queue named ``value``; ``null`` (as the API writes a root's
        parent) the root. An empty value filters nothing, as every filter here."""
        if value == "null":
            return queryset.filter(parent__isnull=True)
        return queryset.filter(parent__name=value)


class QuotaInputSerializer(StrictInput, serializers.Serializer[Any]):
    """A queue's quota of one flavor: guarantee <= deserved <= capability (GPUs). On a flavor
    given whole (``exclusive``: whole GPUs; MIG: whole instances of its profile) every level
    is a whole number ("4", not "4.5"); only ``shared`` flavors take fractions, to the
    milli-GPU."""

    guarantee = gpus_field(min_value=Decimal(0))
    deserved = gpus_field(min_value=Decimal(0))
    capability = gpus_field(min_value=Decimal(0))
    reason = serializers.CharField(max_length=400, required=False, allow_blank=True, default="")


class QueueViewSet(viewsets.ModelViewSet[Queue]):
    """The queue tree: every role reads every queue (shares and usage at the queue level);
    admins create, change and delete queues and set their quotas."""

    queryset = queue_rows()
    serializer_class = QueueSerializer
    filterset_class = QueueFilter
    ordering_fields = ("name",)
    permission_classes = (ActionRoles,)
    default_roles = ADMINS
    action_roles = {"list": EVERYONE, "retrieve": EVERYONE}
    lookup_field = "name"
    lookup_value_regex = r"[-a-zA-Z0-9_.]+"
    http_method_names = ("get", "post", "put", "patch", "delete", "head", "options")

    def get_serializer_context(self) -> dict[str, Any]:
        """The pool's usage figures, read once per request."""
        context = super().get_serializer_context()
        if self.action in {"list", "retrieve"}:
            context["usage"] = queue_usage()
        return context

    def _saved(self, queue: Queue) -> Queue:
        return self.get_queryset().get(pk=queue.pk)

    def perform_create(self, serializer: QueueSerializer) -> None:  # type: ignore[override]
        """Create through the audited action."""
        queue = do_save_queue(Queue(**serializer.validated_data), acting_user=self.request.user)
        serializer.instance = self._saved(queue)

    def perform_update(self, serializer: QueueSerializer) -> None:  # type: ignore[override]
        """Change through the audited action (re-parenting keeps guarantees inside)."""
        queue = Queue.objects.get(pk=serializer.instance.pk)  # type: ignore[union-attr]
        for field, value in serializer.validated_data.items():
            setattr(queue, field, value)
        serializer.instance = self._saved(do_save_queue(queue, acting_user=self.request.user))

    def perform_destroy(self, instance: Queue) -> None:
        """Delete through the audited action (refused while it has children or history)."""
        do_delete_queue(Queue.objects.get(pk=instance.pk), acting_user=self.request.user)

    def _flavor(self, name: str) -> Flavor:
        flavor = Flavor.objects.filter(name=name).first()
        if flavor is None:
            raise NotFound(f"No flavor {name}.")
        return flavor

    @extend_schema(request=QuotaInputSerializer, responses={200: QueueSerializer})
    @action(detail=True, methods=["put"], url_path=r"quotas/(?P<flavor>[a-z0-9][a-z0-9.\-]*)")
    def quota(self, request: Request, name: str, flavor: str) -> Response:
        """Set the queue's quota of a flavor; refused (400, naming the level) when it breaks a
        rule: whole numbers on a flavor given whole (``exclusive``: whole GPUs; MIG: whole
        instances; only ``shared`` flavors take fractions, to the milli-GPU), guarantee <=
        deserved <= capability, guarantees inside the parent's and the pool's healthy
        capacity (the refusal says what guarantee the queue can hold)."""
        queue = self.get_object()
        form = QuotaInputSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        do_set_queue_quota(
            queue,
            self._flavor(flavor),
            guarantee=data["guarantee"],
            deserved=data["deserved"],
            capability=data["capability"],
            acting_user=request.user,
            reason=data["reason"],
        )
        return Response(self.get_serializer(self._saved(queue)).data)

    @extend_schema(request=None, responses={204: None})
    @quota.mapping.delete
    def delete_quota(self, request: Request, name: str, flavor: str) -> Response:
        """Remove the queue's quota of a flavor (its children then count against the next
        holder up)."""
        queue = self.get_object()
        found = queue.quotas.filter(flavor=self._flavor(flavor)).select_related("flavor").first()
        if found is None:
            raise NotFound(f"Queue {queue.name} has no quota of {flavor}.")
        do_delete_queue_quota(found, acting_user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


# ----------------------------------------------------------------------------- classes


class PriorityClassSerializer(StrictInput, serializers.ModelSerializer[PriorityClass]):
    """A priority class: value, preemption policy, budget rate, whether it is the default, and
    its idle policy (seconds idle before an alert, before a reclaim; null: never). Its name is
    fixed once created; ``default: true`` moves the default to it, and the default class is
    neither unticked nor deleted (another class takes over instead)."""

    class Meta:
        model = PriorityClass
        fields = (
            "name",
            "value",
            "preemption_policy",
            "budget_rate",
            "default",
            "idle_alert_after_s",
            "idle_reclaim_after_s",
            "description",
        )
        # No "already exists" check of the one-default constraint: ``default: true`` moves
        # the default (``do_save_priority_class``), which checks the rules.
        extra_kwargs: dict[str, dict[str, Any]] = {
            "default": {"validators": []},
        }


class PriorityClassViewSet(viewsets.ModelViewSet[PriorityClass]):
    """Priority classes: every role reads them; admins create, change and delete them."""

    queryset = PriorityClass.objects.all()
    serializer_class = PriorityClassSerializer
    filterset_fields = ("preemption_policy", "default")
    ordering_fields = ("value", "name")
    permission_classes = (ActionRoles,)
    default_roles = ADMINS
    action_roles = {"list": EVERYONE, "retrieve": EVERYONE}
    lookup_field = "name"
    lookup_value_regex = r"[-a-zA-Z0-9_.]+"
    http_method_names = ("get", "post", "patch", "delete", "head", "options")

    def perform_create(self, serializer: PriorityClassSerializer) -> None:  # type: ignore[override]
        """Create through the audited action."""
        serializer.instance = do_save_priority_class(
            PriorityClass(**serializer.validated_data), acting_user=self.request.user
        )

    def perform_update(self, serializer: PriorityClassSerializer) -> None:  # type: ignore[override]
        """Change through the audited action."""
        found = PriorityClass.objects.get(pk=serializer.instance.pk)  # type: ignore[union-attr]
        for field, value in serializer.validated_data.items():
            setattr(found, field, value)
        serializer.instance = do_save_priority_class(found, acting_user=self.request.user)

    def perform_destroy(self, instance: PriorityClass) -> None:
        """Delete through the audited action (refused while workloads or budgets use it)."""
        do_delete_priority_class(instance, acting_user=self.request.user)


# ----------------------------------------------------------------------------- budgets


class BudgetSerializer(serializers.ModelSerializer[PriorityBudget]):
    """A tenant's priority budget for one class and period, and its ledger's sums (GPU-hours)."""

    tenant: serializers.SlugRelatedField[Tenant] = NameRelatedField(
        slug_field="name", read_only=True
    )
    priority_class: serializers.SlugRelatedField[PriorityClass] = NameRelatedField(
        slug_field="name", read_only=True
    )
    remaining_gpu_hours = serializers.DecimalField(
        max_digits=14,
        decimal_places=4,
        source="remaining",
        read_only=True,
        help_text="The ledger's balance: granted, less spent and held in open reservations.",
    )
    period_last_day = period_last_day_field()
    spent_gpu_hours = serializers.SerializerMethodField()
    reserved_gpu_hours = serializers.SerializerMethodField()

    class Meta:
        model = PriorityBudget
        fields = (
            "id",
            "tenant",
            "priority_class",
            "period_start",
            "period_end",
            "period_last_day",
            "gpu_hours",
            "remaining_gpu_hours",
            "spent_gpu_hours",
            "reserved_gpu_hours",
        )
        read_only_fields = fields

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=4))
    def get_spent_gpu_hours(self, budget: Any) -> str:
        """GPU-hours spent running at the class."""
        return f"{-budget.spent:.4f}"

    @extend_schema_field(serializers.DecimalField(max_digits=14, decimal_places=4))
    def get_reserved_gpu_hours(self, budget: Any) -> str:
        """GPU-hours held for protected windows that have not ended."""
        return f"{-budget.reserved:.4f}"


class GrantSerializer(StrictInput, serializers.Serializer[Any]):
    """Set the GPU-hours granted to a tenant at a class for a period (written to the ledger
    as the difference)."""

    tenant = NameRelatedField(slug_field="name", queryset=Tenant.objects.all())
    priority_class = NameRelatedField(slug_field="name", queryset=PriorityClass.objects.all())
    period_start = serializers.DateField()
    period_end = serializers.DateField(help_text="Exclusive: the first day after the period.")
    gpu_hours = serializers.DecimalField(max_digits=12, decimal_places=3, min_value=Decimal(0))
    reason = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class LedgerEntrySerializer(serializers.ModelSerializer[BudgetLedgerEntry]):
    """One movement on a budget: grants add; reservations and spending subtract; settlements
    give reservations back."""

    workload = serializers.SerializerMethodField()

    class Meta:
        model = BudgetLedgerEntry
        fields = ("id", "kind", "gpu_hours", "at", "workload", "note")
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_workload(self, entry: BudgetLedgerEntry) -> str | None:
        """The workload it concerns, as ``namespace/name``."""
        return None if entry.workload is None else entry.workload.qualified_name()


class LedgerEntryFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter a budget's ledger by kind of movement and by time (``since`` inclusive,
    ``until`` exclusive, ISO 8601 with any offset)."""

    kind = filters.MultipleChoiceFilter(choices=LedgerEntryKind.choices)
    since = UtcDateTimeFilter(field_name="at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = BudgetLedgerEntry
        fields = ("kind", "since", "until")


class BudgetFilter(filters.FilterSet):  # type: ignore[misc]
    """Filter budgets by tenant (several: the parameter repeated, ``tenant=nlp&tenant=vision``),
    class and a day their period covers (a tenant or class that names nothing is a 400 naming
    it: ``NameFilter``, ``NamesFilter``)."""

    tenant = NamesFilter(field_name="tenant__name", names=Tenant)
    priority_class = NameFilter(field_name="priority_class__name", names=PriorityClass)
    covers = filters.DateFilter(method="filter_covers", label="A day inside the period")

    class Meta:
        model = PriorityBudget
        fields = ("tenant", "priority_class", "covers")

    def filter_covers(self, queryset: Any, name: str, value: Any) -> Any:
        """Budgets whose period contains the day."""
        return queryset.filter(covering(value))


class BudgetViewSet(
    CSVExport,
    TenantScoped,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet[PriorityBudget],
):
    """Priority budgets with their ledger (the list also as CSV, ``?format=csv``): a tenant's
    leads and members and finance read them; admins grant (``do_grant_budget``: the grant is
    set, the ledger records the difference)."""

    queryset = budget_rows()
    serializer_class = BudgetSerializer
    filterset_class = BudgetFilter
    ordering_fields = ("period_start", "tenant__name")
    permission_classes = (ActionRoles,)
    default_roles = EVERYONE
    action_roles = {"create": ADMINS}
    tenant_field = "tenant"
    finance_sees_all = True
    csv_name = "budgets"

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        """The grant's shape on create, the ledger's on ``ledger``."""
        if self.action == "create":
            return GrantSerializer
        if self.action == "ledger":
            return LedgerEntrySerializer
        return BudgetSerializer

    @extend_schema(request=GrantSerializer, responses={201: BudgetSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Grant a budget (or change a period's grant) through the audited action."""
        form = GrantSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        budget = do_grant_budget(
            data["tenant"],
            data["priority_class"],
            period_start=data["period_start"],
            period_end=data["period_end"],
            gpu_hours=data["gpu_hours"],
            acting_user=request.user,
            reason=data["reason"],
        )
        found = self.get_queryset().get(pk=budget.pk)
        return Response(BudgetSerializer(found).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH, description="The budget.")],
        responses={200: LedgerEntrySerializer(many=True)},
    )
    @action(
        detail=True,
        methods=["get"],
        # The action lists entries: the queryset, scope, filters and ordering are theirs (the
        # schema offers these filters, and the list applies them).
        queryset=BudgetLedgerEntry.objects.select_related("workload"),
        tenant_field="budget__tenant",
        filterset_class=LedgerEntryFilter,
        ordering_fields=("at", "gpu_hours", "id"),
    )
    def ledger(self, request: Request, pk: str) -> Response:
        """The budget's ledger, oldest first unless ``?ordering=`` says otherwise (``at``,
        ``gpu_hours``, ``id``; ``-`` for descending), filtered by ``kind``, ``since`` and
        ``until``, paginated. A budget the caller does not see answers 404."""
        budgets = tenant_scoped(
            PriorityBudget.objects.all(),
            self.access(),
            BudgetViewSet.tenant_field,
            finance_sees_all=self.finance_sees_all,
        )
        budget = get_object_or_404(budgets, pk=pk)
        self.check_object_permissions(request, budget)
        entries: QuerySet[BudgetLedgerEntry] = self.filter_queryset(
            self.get_queryset().filter(budget=budget)
        )
        order = [str(term) for term in entries.query.order_by]  # none: at, then id
        if order and not any(term.lstrip("-") == "id" for term in order):
            # Entries of one moment (or one amount) keep one order from page to page.
            entries = entries.order_by(*order, "-id" if order[0].startswith("-") else "id")
        page = self.paginate_queryset(entries)  # type: ignore[arg-type]
        serializer = LedgerEntrySerializer(page, many=True)
        return self.get_paginated_response(serializer.data)


def register(router: BaseRouter) -> None:
    """Add this app's resources to the API router."""
    router.register("queues", QueueViewSet, basename="queue")
    router.register("priority-classes", PriorityClassViewSet, basename="priority-class")
    router.register("budgets", BudgetViewSet, basename="budget")
