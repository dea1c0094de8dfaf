"""Admin for tenants with their namespaces, memberships and site roles; every change runs a
tenancy action, so it is validated and audited. Users are deleted here too: their memberships
and site roles go through the same actions first (``PoolUserAdmin``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db import transaction
from django.db.models import Count, QuerySet
from django.forms import BaseModelFormSet, ModelForm, Widget
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from gpupool.audit.admin import ActionModelAdmin, TabularInline
from gpupool.number_formats import listed
from gpupool.tenancy.actions import (
    do_delete_tenant,
    do_grant_site_role,
    do_remove_membership,
    do_revoke_site_role,
    do_save_tenant,
    do_set_membership,
    remove_from_tenancy,
)
from gpupool.tenancy.choices import MembershipRole
from gpupool.tenancy.models import Membership, SiteRole, Tenant, TenantNamespace

# django-stubs makes ModelForm generic; at run time it is not subscriptable.
if TYPE_CHECKING:
    MembershipModelForm = ModelForm[Membership]
    BaseUserAdmin = UserAdmin[Any]
else:
    MembershipModelForm = ModelForm
    BaseUserAdmin = UserAdmin


class NamespaceInline(TabularInline):
    """The Kubernetes namespaces the tenant owns."""

    model = TenantNamespace
    extra = 1
    fields = ["name"]


class ShownAsText(Widget):
    """A fixed field's value as text, where the admin would offer to choose another."""

    def __init__(self, shown: str) -> None:
        super().__init__()
        self.shown = shown

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> SafeString:
        return format_html('<div class="readonly">{}</div>', self.shown)


class MembershipInlineForm(MembershipModelForm):
    """A row of the tenant's members: a new row chooses its user; an existing row's user is
    fixed (``Membership.user`` is, as ``MembershipAdmin`` and the API hold it), so it is
    shown as text and only the role changes in place. A disabled field keeps its stored
    value whatever is posted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None and "user" in self.fields:
            self.fields["user"].disabled = True
            self.fields["user"].widget = ShownAsText(self.instance.user.get_username())


class MembershipInline(TabularInline):
    """The tenant's members and leads: a new row names its user; on an existing one only the
    role changes (``MembershipInlineForm``)."""

    model = Membership
    form = MembershipInlineForm
    extra = 0
    autocomplete_fields = ["user"]
    fields = ["user", "role"]


@admin.register(Tenant)
class TenantAdmin(ActionModelAdmin):
    """Tenants with their namespaces and members inline; every change is a tenancy action."""

    list_display = ["name", "display_name", "organization", "namespace_list", "member_count"]
    list_filter = ["organization"]
    search_fields = ["name", "display_name", "organization", "namespaces__name"]
    inlines = [NamespaceInline, MembershipInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tenant]:
        """Tenants with their namespaces and member counts, in two queries for the list."""
        queryset: QuerySet[Tenant] = super().get_queryset(request)
        return queryset.prefetch_related("namespaces").annotate(members=Count("memberships"))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """The name is fixed once created (``Tenant.clean``): shown, not offered for editing,
        so a tenant made before the name rule (``tenancy.W001``) can still be edited."""
        return ["name"] if obj is not None else []

    @admin.display(description="namespaces")
    def namespace_list(self, obj: Tenant) -> str:
        return ", ".join(namespace.name for namespace in obj.namespaces.all()) or "-"

    @admin.display(description="members", ordering="members")
    def member_count(self, obj: Tenant) -> int:
        return getattr(obj, "members", 0)

    def save_model(self, request: HttpRequest, obj: Tenant, form: Any, change: bool) -> None:
        self.adopt(
            obj, self.run_action(request, lambda: do_save_tenant(obj, acting_user=request.user))
        )

    def delete_model(self, request: HttpRequest, obj: Tenant) -> None:
        self.run_action(request, lambda: do_delete_tenant(obj, acting_user=request.user))

    def save_formset(
        self, request: HttpRequest, form: Any, formset: BaseModelFormSet[Any, Any], change: bool
    ) -> None:
        if formset.model is TenantNamespace:
            formset.save(commit=False)  # writes nothing; tells the admin's history what changed
            # The namespaces the forms leave: existing rows not deleted, renamed or new ones.
            names = [
                row.cleaned_data["name"]
                for row in formset.forms
                if row.cleaned_data.get("name") and not row.cleaned_data.get("DELETE")
            ]
            self.run_action(
                request,
                partial(do_save_tenant, form.instance, namespaces=names, acting_user=request.user),
            )
            return
        if formset.model is not Membership:
            super().save_formset(request, form, formset, change)
            return
        changed = formset.save(commit=False)

        # New leads first, then removals, then the other changes: a form that hands the lead
        # to another member and demotes or removes the old one in one save is not refused as
        # leaving the tenant without a lead (``do_set_membership``).
        def set_role(membership: Membership) -> None:
            self.run_action(
                request,
                partial(
                    do_set_membership,
                    membership.user,
                    form.instance,
                    role=membership.role,
                    acting_user=request.user,
                ),
            )

        for membership in changed:
            if membership.role == MembershipRole.LEAD:
                set_role(membership)
        for membership in formset.deleted_objects:
            self.run_action(
                request, partial(do_remove_membership, membership, acting_user=request.user)
            )
        for membership in changed:
            if membership.role != MembershipRole.LEAD:
                set_role(membership)


@admin.register(Membership)
class MembershipAdmin(ActionModelAdmin):
    """Every membership; adding, changing the role and removing are audited."""

    list_display = ["user", "tenant", "role", "created_at"]
    list_filter = ["role", "tenant"]
    search_fields = ["user__username", "tenant__name"]
    autocomplete_fields = ["user", "tenant"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """Only the role changes in place; another user or tenant is another membership."""
        return ["user", "tenant"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        saved = self.run_action(
            request,
            lambda: do_set_membership(
                obj.user, obj.tenant, role=obj.role, acting_user=request.user
            ),
        )
        self.adopt(obj, saved)

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        self.run_action(request, lambda: do_remove_membership(obj, acting_user=request.user))


@admin.register(SiteRole)
class SiteRoleAdmin(ActionModelAdmin):
    """Site-wide admin and finance roles; granting and revoking are audited."""

    list_display = ["user", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["user__username"]
    autocomplete_fields = ["user"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """A role is granted or revoked, never edited in place."""
        return ["user", "role"] if obj is not None else []

    def save_model(self, request: HttpRequest, obj: SiteRole, form: Any, change: bool) -> None:
        if not change:
            saved = self.run_action(
                request,
                lambda: do_grant_site_role(obj.user, role=obj.role, acting_user=request.user),
            )
            self.adopt(obj, saved)

    def delete_model(self, request: HttpRequest, obj: SiteRole) -> None:
        self.run_action(request, lambda: do_revoke_site_role(obj, acting_user=request.user))


# ----------------------------------------------------------------------------- users


def leads_lost(users: Iterable[Any]) -> list[str]:
    """Why deleting ``users`` together would leave a tenant without a lead, one line per such
    tenant naming its lead memberships (none when the delete may go ahead): the rule of
    ``do_remove_membership``, for the batch as a whole. A tenant whose members all go with
    them may lose its lead with them."""
    ids = [account.pk for account in users]
    leaving: dict[Tenant, list[Membership]] = {}
    for membership in (
        Membership.objects.filter(user__in=ids, role=MembershipRole.LEAD)
        .select_related("tenant", "user")
        .order_by("tenant__name", "user__username")
    ):
        leaving.setdefault(membership.tenant, []).append(membership)
    problems = []
    for tenant, leads in leaving.items():
        staying = tenant.memberships.exclude(user__in=ids)
        if not staying.exists() or staying.filter(role=MembershipRole.LEAD).exists():
            continue
        one = len(leads) == 1
        problems.append(
            f"{'Membership' if one else 'Memberships'}: {' and '.join(map(str, leads))}, "
            f"{'the only lead' if one else 'the only leads'} of tenant {tenant}, which has "
            f"other members: a tenant's lead files its requests and manages its members, so "
            f"make another member of {tenant} a lead first"
        )
    return problems


def _numbers(ids: Sequence[int]) -> str:
    """``#3``, ``#3 and #5`` or ``#3, #5 and #8`` (the first 10, then how many more)."""
    shown = [f"#{number}" for number in ids[:10]]
    if len(ids) > 10:
        shown.append(f"{len(ids) - 10} more")
    return listed(shown)


def history_kept(users: Iterable[Any]) -> list[str]:
    """Why each of ``users`` that filed or decided a quota or budget request, or started a
    what-if run, cannot be deleted, one line per such user (none when the delete may go
    ahead): those records name the account and are kept as history, so the account is
    deactivated instead (``is_active`` off: it can no longer sign in)."""
    from gpupool.quotas.models import QuotaRequest, WhatIfRun  # quotas builds on tenancy

    lines = []
    for account in users:
        parts = []
        filed = list(
            QuotaRequest.objects.filter(requested_by=account)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        decided = list(
            QuotaRequest.objects.filter(decided_by=account)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        runs = WhatIfRun.objects.filter(started_by=account).count()
        if filed:
            parts.append(f"filed request{'s' * (len(filed) != 1)} {_numbers(filed)}")
        if decided:
            parts.append(f"decided request{'s' * (len(decided) != 1)} {_numbers(decided)}")
        if runs:
            parts.append(f"started {runs} what-if run{'s' * (runs != 1)}")
        if not parts:
            continue
        lines.append(
            f"User {account.get_username()} {' and '.join(parts)}, which are kept as history "
            f"and keep the account: deactivate it instead (untick Active on its page), so it "
            f"can no longer sign in"
        )
    return lines


User = get_user_model()


class PoolUserAdmin(ActionModelAdmin, BaseUserAdmin):
    """Django's user admin, except that deleting a user (one, or the selected ones) is refused
    while it would leave a tenant without a lead or while requests or what-if runs name it
    (``history_kept``: deactivate it instead), and removes the user's memberships and site
    roles through the tenancy actions, so each removal is audited."""

    def get_deleted_objects(
        self, objs: Sequence[Any] | QuerySet[Any], request: HttpRequest
    ) -> tuple[list[Any], dict[Any, Any], set[Any], list[Any]]:
        """The confirmation page lists a tenant that would lose its last lead as something
        protected, so the delete is refused there (and on the post that confirms it)."""
        deletable, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        kept = history_kept(objs)
        if kept:
            # Said here instead of as objects nobody may delete (the request admin deletes
            # none): Django's page would name the permission, not the way out.
            from gpupool.quotas.models import QuotaRequest, WhatIfRun

            explained = {str(model._meta.verbose_name) for model in (QuotaRequest, WhatIfRun)}
            perms_needed = {name for name in perms_needed if str(name) not in explained}
            # They are the only records that protect a user (the others let it go), and
            # ``kept`` names them.
            protected = []
        return deletable, counts, perms_needed, [*kept, *protected, *leads_lost(objs)]

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        """The user's memberships and site roles through the tenancy actions, then the user
        (an account, not domain state: Django's own delete)."""
        delete_user = super().delete_model

        def delete() -> None:
            with transaction.atomic():
                remove_from_tenancy([obj], acting_user=request.user)
                delete_user(request, obj)

        self.run_action(request, delete)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        """The selected users as one batch (not one by one, as ``ActionModelAdmin`` deletes):
        the last-lead rule judges them together, and one refusal keeps them all."""
        delete_users = super(ActionModelAdmin, self).delete_queryset

        def delete() -> None:
            with transaction.atomic():
                remove_from_tenancy(list(queryset), acting_user=request.user)
                delete_users(request, queryset)

        with transaction.atomic():
            self.run_action(request, delete)


if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, PoolUserAdmin)
