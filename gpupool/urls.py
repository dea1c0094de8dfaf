"""Top-level URL routes: the admin site, health, the API, and the dashboard at ``/``."""

from django.contrib import admin
from django.urls import include, path

from gpupool.control.metrics import metrics_view
from gpupool.control.views import healthz

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/", include("gpupool.api.urls")),
    path("", include("gpupool.dashboard.urls")),
]
