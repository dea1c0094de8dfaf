"""Top-level URL routes: the admin site, health, the API, and the dashboard at ``/``.

An address no route takes is answered by ``templates/404.html`` (the dashboard's frame) and a
crash by ``templates/500.html`` (static); anything under ``/api/`` answers the API's JSON
errors instead (``NoSuchResource``).
"""

from django.contrib import admin
from django.http import HttpRequest, HttpResponseRedirect
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView

from gpupool.api.views import NoSuchResource
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
    # The API's front doors, for who types the short address: its docs and schema are the
    # current version's. Temporary redirects (302): they follow the current version, and a
    # browser keeps a permanent one (301) after a next version moves them.
    path("api/", RedirectView.as_view(pattern_name="api:docs")),
    path("api/docs/", RedirectView.as_view(pattern_name="api:docs")),
    path("api/schema/", RedirectView.as_view(pattern_name="api:schema", query_string=True)),
    # Any other address under /api/ is the API's 404 (JSON), not the pages' HTML one.
    re_path(r"^api/.*/$", NoSuchResource.as_view()),
    path("", include("gpupool.dashboard.urls")),
]
