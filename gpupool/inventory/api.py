"""API of the inventory: flavors (the pool's public catalogue; admins change them)."""

from __future__ import annotations

from rest_framework import serializers, viewsets
from rest_framework.routers import BaseRouter

from gpupool.api.permissions import ADMINS, EVERYONE, ActionRoles
from gpupool.inventory.actions import do_delete_flavor, do_save_flavor
from gpupool.inventory.models import Flavor


class FlavorSerializer(serializers.ModelSerializer[Flavor]):
    """A kind of GPU resource: sharing mode, card, MIG profile, labels, memory and price."""

    class Meta:
        model = Flavor
        fields = (
            "name",
            "sharing",
            "gpu_model",
            "mig_profile",
            "node_labels",
            "gpu_memory_gb",
            "hourly_price",
            "description",
        )


class FlavorViewSet(viewsets.ModelViewSet[Flavor]):
    """Flavors: every role reads the catalogue; admins create, change and delete flavors."""

    queryset = Flavor.objects.all()
    serializer_class = FlavorSerializer
    permission_classes = (ActionRoles,)
    default_roles = ADMINS
    action_roles = {"list": EVERYONE, "retrieve": EVERYONE}
    lookup_field = "name"
    lookup_value_regex = r"[a-z0-9.\-]+"
    filterset_fields = ("sharing",)
    http_method_names = ("get", "post", "patch", "delete", "head", "options")

    def perform_create(self, serializer: FlavorSerializer) -> None:  # type: ignore[override]
        """Create through the audited action."""
        serializer.instance = do_save_flavor(
            Flavor(**serializer.validated_data), acting_user=self.request.user
        )

    def perform_update(self, serializer: FlavorSerializer) -> None:  # type: ignore[override]
        """Change through the audited action."""
        flavor = serializer.instance
        assert flavor is not None
        for field, value in serializer.validated_data.items():
            setattr(flavor, field, value)
        serializer.instance = do_save_flavor(flavor, acting_user=self.request.user)

    def perform_destroy(self, instance: Flavor) -> None:
        """Delete through the audited action (refused while anything names the flavor)."""
        do_delete_flavor(instance, acting_user=self.request.user)


def register(router: BaseRouter) -> None:
    """Add this app's resources to the API router."""
    router.register("flavors", FlavorViewSet, basename="flavor")
