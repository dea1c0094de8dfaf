"""Top-level URL routes: the admin site, health, the API, and the dashboard at ``/``."""

from django.contrib import admin
from django.urls import include, path

from gpupool.control.views import healthz

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("api/v1/", include("gpupool.api.urls")),
    path("", include("gpupool.dashboard.urls")),
]
