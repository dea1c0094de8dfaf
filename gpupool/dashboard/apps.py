"""The dashboard: the pages people open every day, on the API's actions and queries."""

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The dashboard app (no models: its template tags and static finder)."""

    name = "gpupool.dashboard"
    label = "dashboard"
