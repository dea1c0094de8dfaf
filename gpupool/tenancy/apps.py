"""Django app configuration for ``gpupool.tenancy``."""

from django.apps import AppConfig


class TenancyConfig(AppConfig):
    """Tenants, their members and site-wide roles."""

    name = "gpupool.tenancy"
    label = "tenancy"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the tenant names' system check (a database check: ``migrate`` runs it)
        and the receivers that audit the memberships a user's or a tenant's delete takes
        away."""
        from django.core import checks

        from gpupool.tenancy import signals
        from gpupool.tenancy.checks import check_tenant_names

        checks.register(check_tenant_names, checks.Tags.database)
        signals.connect()
