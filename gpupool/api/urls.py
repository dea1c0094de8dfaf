"""``/api/v1/``: the router every app's ``api.py`` registers on, tokens, schema and docs.

Resource paths are plural nouns; each app's ``api.py`` has ``register(router)``. The OpenAPI 3
schema is at ``schema/`` and a Swagger UI served from the ``drf-spectacular-sidecar`` wheel
(no CDN) at ``docs/``.
"""

from __future__ import annotations

from importlib import import_module

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import APIRootView, DefaultRouter

from gpupool.api.permissions import EVERYONE
from gpupool.api.views import NoSuchResource, TokenView

API_MODULES = (
    "gpupool.tenancy.api",
    "gpupool.inventory.api",
    "gpupool.workloads.api",
    "gpupool.quotas.api",
    "gpupool.accounting.preemptions_api",
    "gpupool.control.api",
    "gpupool.quotas.requests_api",
    "gpupool.notifications.api",
    "gpupool.utilization.api",
    "gpupool.accounting.reports_api",
    "gpupool.audit.api",
)


class Root(APIRootView):
    """The API's index of resources, for every role."""

    default_roles = EVERYONE


class Router(DefaultRouter):
    """DRF's default router with an index every role may read."""

    APIRootView = Root


router = Router()
for module in API_MODULES:
    import_module(module).register(router)

app_name = "api"
urlpatterns = [
    path("", include(router.urls)),
    path("tokens/", TokenView.as_view(), name="token"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api:schema"), name="docs"),
    # Last: an address that matched nothing above is the API's 404, not the site's page.
    # (Only addresses that end in a slash: one without is sent there first, as before.)
    re_path(r"^.*/$", NoSuchResource.as_view()),  # (no name: no resource to reverse)
]
