"""plotly.js and htmx come from their Python packages, never from a CDN."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dashboard_pages import text
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import Client

from gpupool.dashboard.finders import PLOTLY_STATIC_PATH, PlotlyFinder, plotly_package_data


def test_plotly_js_is_the_plotly_wheels_own_file() -> None:
    found = finders.find(PLOTLY_STATIC_PATH)
    assert found == str(plotly_package_data() / "plotly.min.js")
    assert Path(found).stat().st_size > 1_000_000
    assert PlotlyFinder().find("vendor/plotly/other.js") is None
    assert PlotlyFinder().find("vendor/plotly/other.js", find_all=True) == []
    assert PlotlyFinder().check() == []


def test_htmx_and_the_pages_scripts_are_found_locally() -> None:
    for path in (
        "django_htmx/htmx-2.min.js",
        "dashboard/css/dashboard.css",
        "dashboard/js/charts.js",
        "dashboard/js/time.js",
        "dashboard/js/live.js",
        "dashboard/js/requests.js",
    ):
        assert finders.find(path), path


def test_collectstatic_gathers_plotly_and_htmx(tmp_path: Path, settings: Any) -> None:
    settings.STATIC_ROOT = tmp_path
    call_command("collectstatic", "--noinput", verbosity=0)
    assert (tmp_path / PLOTLY_STATIC_PATH).is_file()
    assert (tmp_path / "django_htmx" / "htmx-2.min.js").is_file()
    assert (tmp_path / "dashboard" / "js" / "charts.js").is_file()


def test_pages_load_no_script_or_stylesheet_from_another_host(page_as: Any) -> None:
    pages = [text(Client().get("/login/"))]
    pages += [text(page_as("ada").get(url)) for url in ("/overview/", "/approvals/", "/cluster/")]
    for url, page in zip(("/login/", "/overview/", "/approvals/", "/cluster/"), pages, strict=True):
        sources = re.findall(r'<(?:script|link)[^>]+(?:src|href)="([^"]+)"', page)
        assert sources, url
        assert all(source.startswith("/static/") for source in sources), (url, sources)
    overview = text(page_as("ada").get("/overview/"))
    assert '/static/vendor/plotly/plotly.min.js"' in overview
    assert '/static/django_htmx/htmx-2.min.js"' in overview
