"""What every dashboard template sees: the navigation for the user, the page being shown,
and the palette as CSS custom properties.

The navigation is computed lazily, when a template uses it, so the other pages rendered with
a request (the admin site, the browsable API) pay no query for it.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from gpupool.api.access import request_access
from gpupool.dashboard.navigation import pages_for, role_names
from gpupool.dashboard.palette import css_variables

PALETTE_CSS = css_variables()


def dashboard(request: HttpRequest) -> dict[str, Any]:
    """The palette, and for a logged-in user the navigation, their roles and the page."""
    context: dict[str, Any] = {"palette_css": PALETTE_CSS}
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        context |= {
            "nav_pages": SimpleLazyObject(lambda: pages_for(request_access(request))),
            "user_roles": SimpleLazyObject(lambda: role_names(request_access(request))),
            "current_page": getattr(request, "dashboard_page", None),
        }
    return context
