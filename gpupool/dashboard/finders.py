"""plotly.js served from the ``plotly`` wheel's package data, never from a CDN.

``PlotlyFinder`` makes ``static/vendor/plotly/plotly.min.js`` the file the installed
``plotly`` package ships (the version its Python side writes figures for), for ``runserver``
and for ``collectstatic`` alike. htmx needs no finder: ``django-htmx`` is an app with the
script in its own static folder (``{% htmx_script %}``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, overload

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import CheckMessage, Error
from django.core.files.storage import FileSystemStorage

PLOTLY_PREFIX = "vendor/plotly"
PLOTLY_FILE = "plotly.min.js"
PLOTLY_STATIC_PATH = f"{PLOTLY_PREFIX}/{PLOTLY_FILE}"


def plotly_package_data() -> Path:
    """The folder of the installed plotly wheel that holds ``plotly.min.js``."""
    return Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    """Finds ``vendor/plotly/plotly.min.js`` in the installed plotly package."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=plotly_package_data())
        self.storage.prefix = PLOTLY_PREFIX  # type: ignore[attr-defined]  # collectstatic reads it

    def check(self, **kwargs: Any) -> list[CheckMessage]:
        """An error when the plotly wheel has no ``plotly.min.js`` (a broken install)."""
        if not (plotly_package_data() / PLOTLY_FILE).is_file():
            return [
                Error(
                    f"{plotly_package_data() / PLOTLY_FILE} is missing: reinstall plotly",
                    id="dashboard.E001",
                )
            ]
        return []

    @overload
    def find(self, path: str, find_all: Literal[False] = False) -> str | None: ...
    @overload
    def find(self, path: str, find_all: Literal[True]) -> list[str]: ...
    def find(self, path: str, find_all: bool = False) -> str | list[str] | None:
        """The file's absolute path for ``vendor/plotly/plotly.min.js``; nothing otherwise."""
        found = str(plotly_package_data() / PLOTLY_FILE) if path == PLOTLY_STATIC_PATH else None
        if find_all:
            return [found] if found else []
        return found

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        """The one file, for collectstatic (stored under the prefix)."""
        yield PLOTLY_FILE, self.storage
