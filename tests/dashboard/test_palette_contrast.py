"""The dashboard's colours pass WCAG 2.1 AA, checked as data: every pairing the stylesheet
uses, the heatmap's colours against the page and a free GPU, and no colour outside the
palette in the stylesheet."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpupool.dashboard.palette import (
    CORDONED_GPU,
    FREE_GPU,
    NON_TEXT_AA,
    PAIRINGS,
    TENANT_COLOURS,
    TEXT_AA,
    UI,
    UNHEALTHY_GPU,
    contrast_ratio,
    css_variables,
    relative_luminance,
    tenant_colours,
)

STYLESHEET = Path(__file__).resolve().parents[2] / "frontend" / "css" / "dashboard.css"


def test_the_contrast_ratio_is_wcags() -> None:
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#ffffff", "#ffffff") == pytest.approx(1.0)
    # WCAG's own example: #767676 on white is the lightest grey that passes 4.5:1
    assert contrast_ratio("#767676", "#ffffff") == pytest.approx(4.54, abs=0.01)
    assert relative_luminance("#ff0000") == pytest.approx(0.2126)
    with pytest.raises(ValueError, match="not a #rrggbb colour"):
        relative_luminance("red")


@pytest.mark.parametrize(
    ("foreground", "background", "minimum"), PAIRINGS, ids=[f"{f} on {b}" for f, b, _ in PAIRINGS]
)
def test_every_pairing_the_pages_use_passes_aa(
    foreground: str, background: str, minimum: float
) -> None:
    assert contrast_ratio(UI[foreground], UI[background]) >= minimum


@pytest.mark.parametrize("colour", TENANT_COLOURS)
def test_each_tenant_colour_stands_out_from_the_page_and_a_free_gpu_and_carries_white_text(
    colour: str,
) -> None:
    assert contrast_ratio(colour, UI["page"]) >= NON_TEXT_AA
    assert contrast_ratio(colour, FREE_GPU) >= NON_TEXT_AA
    assert contrast_ratio("#ffffff", colour) >= TEXT_AA


def test_broken_and_cordoned_gpus_stand_out_from_the_page() -> None:
    for colour in (UNHEALTHY_GPU, CORDONED_GPU):
        assert contrast_ratio(colour, UI["page"]) >= NON_TEXT_AA
        assert contrast_ratio(colour, FREE_GPU) >= NON_TEXT_AA


def test_tenant_colours_follow_first_appearance_and_wrap_around() -> None:
    names = [f"t{i}" for i in range(len(TENANT_COLOURS) + 1)]
    colours = tenant_colours([*names, "t0"])
    assert list(colours) == names
    assert colours["t0"] == colours[names[-1]] == TENANT_COLOURS[0]


def test_the_stylesheet_takes_every_colour_from_the_palette() -> None:
    css = STYLESHEET.read_text()
    assert not re.findall(r"#[0-9a-fA-F]{3,8}\b", css), "a colour literal outside the palette"
    assert not re.findall(r"\brgba?\(|\bhsla?\(", css)
    used = set(re.findall(r"var\(--([a-z-]+)\)", css))
    assert used <= set(UI), f"unknown colours: {used - set(UI)}"
    declared = css_variables()
    assert all(f"--{name}:{value};" in declared for name, value in UI.items())


def stylesheet_rules() -> dict[str, dict[str, str]]:
    """The stylesheet's rules: each selector with its declarations (property -> value)."""
    css = re.sub(r"/\*.*?\*/", "", STYLESHEET.read_text(), flags=re.DOTALL)
    rules: dict[str, dict[str, str]] = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        declared = {
            name.strip(): value.strip()
            for name, _, value in (line.partition(":") for line in body.split(";"))
            if value.strip()
        }
        for selector in selectors.split(","):
            rules.setdefault(" ".join(selector.split()), {}).update(declared)
    return rules


def test_a_disabled_button_looks_disabled_whatever_its_kind() -> None:
    """A disabled button (Approve when the action would refuse it) is greyed, not the accent
    of one that acts, with a not-allowed cursor, in a pairing checked for AA above."""
    rules = stylesheet_rules()
    enabled = rules["button"]
    for selector in ("button:disabled", "button.secondary:disabled", "button.danger:disabled"):
        disabled = rules[selector]
        assert disabled["cursor"] == "not-allowed", selector
        colour, background = (disabled[name] for name in ("color", "background"))
        assert (colour, background) == ("var(--muted)", "var(--surface)"), selector
        assert ("muted", "surface", TEXT_AA) in PAIRINGS
        assert disabled["background"] != enabled["background"], selector
        assert "border" in disabled and "opacity" not in disabled, selector
