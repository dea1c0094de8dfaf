"""Top-level URL routes: the admin site, health, the API, and the dashboard at ``/``."""

from django.contrib import admin
from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path

from gpupool.control.metrics import metrics_view
from gpupool.control.views import healthz


def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """Browsers ask /favicon.ico of every site: the pages' own icon (the base template links
    it too), a static SVG."""
    return HttpResponseRedirect(static("dashboard/favicon.svg"))


urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/", include("gpupool.api.urls")),
    path("", include("gpupool.dashboard.urls")),
]
