"""Admin for tenants with their namespaces, memberships and site roles; every change runs a
tenancy action, so it is validated and audited."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.forms import BaseModelFormSet, ModelForm, Widget
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString

from gpupool.audit.admin import ActionModelAdmin, TabularInline
from gpupool.tenancy.actions import (
    do_delete_tenant,
    do_grant_site_role,
    do_remove_membership,
    do_revoke_site_role,
    do_save_tenant,
    do_set_membership,
)
from gpupool.tenancy.choices import MembershipRole
from gpupool.tenancy.models import Membership, SiteRole, Tenant, TenantNamespace

# django-stubs makes ModelForm generic; at run time it is not subscriptable.
if TYPE_CHECKING:
    MembershipModelForm = ModelForm[Membership]
else:
    MembershipModelForm = ModelForm


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
