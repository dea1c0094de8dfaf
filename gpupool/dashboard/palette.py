"""The dashboard's colours, in one place, with the contrast each pairing must reach.

The stylesheet (``frontend/css/dashboard.css``) uses only the CSS custom properties written
from ``UI`` (``css_variables``, put in every page's head by the base template), and the
charts take their colours from here too, so a test can check every pairing the pages use
against WCAG 2.1 AA as data: 4.5:1 for text, 3:1 for large text, focus rings and the cells
of a chart (success criteria 1.4.3 and 1.4.11).
"""

from __future__ import annotations

from collections.abc import Iterable

TEXT_AA = 4.5
NON_TEXT_AA = 3.0

# name -> colour; each is a CSS custom property --name.
UI: dict[str, str] = {
    "page": "#ffffff",
    "surface": "#f5f7fa",
    "border": "#848e9b",
    "text": "#1b1f24",
    "muted": "#4a5563",
    "link": "#1d4ed8",
    "accent": "#1d4ed8",
    "on-accent": "#ffffff",
    "nav": "#1b2a41",
    "on-nav": "#ffffff",
    "nav-muted": "#c9d4e5",
    "nav-current": "#2f4a73",
    "focus": "#e8590c",
    "ok": "#1a7f37",
    "ok-surface": "#e7f5ec",
    "warn": "#8a5a00",
    "warn-surface": "#fdf3dc",
    "danger": "#b42318",
    "danger-surface": "#fdecea",
    "on-danger": "#ffffff",
    "bar": "#1d4ed8",
    "bar-track": "#dfe5ee",
}

# A workload's states on its timeline (chart lines, against the page: 3:1 at least).
WORKLOAD_STATE_COLOURS: dict[str, str] = {
    "pending": UI["warn"],
    "admitted": UI["accent"],
    "running": UI["ok"],
    "preempted": UI["danger"],
    "failed": UI["danger"],
    "succeeded": UI["muted"],
    "cancelled": UI["muted"],
}

# (foreground, background, minimum ratio): every pairing the stylesheet uses.
PAIRINGS: tuple[tuple[str, str, float], ...] = (
    ("text", "page", TEXT_AA),
    ("text", "surface", TEXT_AA),
    ("muted", "page", TEXT_AA),
    ("muted", "surface", TEXT_AA),
    ("link", "page", TEXT_AA),
    ("link", "surface", TEXT_AA),
    ("on-accent", "accent", TEXT_AA),
    ("on-nav", "nav", TEXT_AA),
    ("nav-muted", "nav", TEXT_AA),
    ("on-nav", "nav-current", TEXT_AA),
    ("ok", "ok-surface", TEXT_AA),
    ("warn", "warn-surface", TEXT_AA),
    ("danger", "danger-surface", TEXT_AA),
    ("text", "ok-surface", TEXT_AA),
    ("text", "warn-surface", TEXT_AA),
    ("text", "danger-surface", TEXT_AA),
    ("on-danger", "danger", TEXT_AA),
    ("focus", "page", NON_TEXT_AA),
    ("focus", "nav", NON_TEXT_AA),
    ("focus", "surface", NON_TEXT_AA),
    ("border", "page", NON_TEXT_AA),
    ("bar", "bar-track", NON_TEXT_AA),
)

# The GPU heatmap: one colour per tenant (in order of first appearance, repeating after
# these), each at least 3:1 against the page and against a free GPU, and white text on each
# readable; a free GPU, a broken one and one on a cordoned node.
TENANT_COLOURS: tuple[str, ...] = (
    "#0b5cad",
    "#b4301e",
    "#1e7a34",
    "#6a3d9a",
    "#8a4b08",
    "#b3246f",
    "#00707a",
    "#5c5c00",
    "#4338ca",
    "#c2410c",
)
FREE_GPU = "#e9edf2"
UNHEALTHY_GPU = "#111827"
CORDONED_GPU = "#7f7f7f"
OTHER_SCHEDULER_GPU = "#b8c0cc"  # held by another scheduler's pods: taken, not a tenant's


def _channel(value: int) -> float:
    """One sRGB channel (0-255) as linear light (WCAG 2.1's relative luminance)."""
    c = value / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def relative_luminance(colour: str) -> float:
    """WCAG 2.1 relative luminance of a ``#rrggbb`` colour (0 black .. 1 white)."""
    hex_digits = colour.removeprefix("#")
    if len(hex_digits) != 6:
        raise ValueError(f"{colour!r} is not a #rrggbb colour")
    red, green, blue = (int(hex_digits[i : i + 2], 16) for i in (0, 2, 4))
    return 0.2126 * _channel(red) + 0.7152 * _channel(green) + 0.0722 * _channel(blue)


def contrast_ratio(first: str, second: str) -> float:
    """WCAG 2.1 contrast ratio of two colours, from 1 (none) to 21 (black on white)."""
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)))[::-1]
    return (lighter + 0.05) / (darker + 0.05)


def css_variables(colours: Iterable[tuple[str, str]] | None = None) -> str:
    """The ``:root`` rule declaring every UI colour as ``--name``."""
    pairs = colours if colours is not None else UI.items()
    return ":root{" + "".join(f"--{name}:{value};" for name, value in pairs) + "}"


def tenant_colours(tenants: Iterable[str]) -> dict[str, str]:
    """One heatmap colour per tenant, in order of first appearance."""
    ordered = list(dict.fromkeys(tenants))
    return {name: TENANT_COLOURS[i % len(TENANT_COLOURS)] for i, name in enumerate(ordered)}
