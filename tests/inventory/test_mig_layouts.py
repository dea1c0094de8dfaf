"""MIG layouts follow NVIDIA's fixed profile tables: known profiles, slices within the card."""

import pytest

from gpupool.inventory.mig import MIG_PROFILES, mig_layout_errors

VALID = [
    ("A100-40GB", {"1g.5gb": 7}),
    ("A100-40GB", {"3g.20gb": 2}),
    ("A100-40GB", {"4g.20gb": 1, "3g.20gb": 1}),
    ("A100-40GB", {"7g.40gb": 1}),
    ("A100-80GB", {"3g.40gb": 2}),
    ("H100-80GB", {"2g.20gb": 3, "1g.10gb": 1}),
    ("H100-80GB", {"1g.20gb": 4}),
]

INVALID = [
    ("A100-40GB", {"3g.40gb": 1}, "unknown profile '3g.40gb'"),
    ("A100-40GB", {"1g.5gb": 8}, "exceeds the card's limit of 7"),
    ("A100-40GB", {"4g.20gb": 1, "2g.10gb": 2}, "8 compute slices"),
    ("A100-40GB", {"3g.20gb": 2, "1g.10gb": 1}, "10 memory slices"),
    ("H100-80GB", {"7g.80gb": 1, "1g.10gb": 1}, "8 compute slices"),
    ("H100-80GB", {}, "empty"),
    ("H100-80GB", {"1g.10gb": 0}, "positive whole number"),
    ("B300", {"1g.10gb": 1}, "unknown MIG GPU model"),
]


@pytest.mark.parametrize(
    ("model", "layout"), VALID, ids=[f"{model} {layout}" for model, layout in VALID]
)
def test_a_layout_within_the_card_is_accepted(model: str, layout: dict[str, int]) -> None:
    assert mig_layout_errors(model, layout) == []


@pytest.mark.parametrize(
    ("model", "layout", "why"), INVALID, ids=[f"{model} {layout}" for model, layout, _ in INVALID]
)
def test_a_layout_beyond_the_card_is_refused_and_says_why(
    model: str, layout: dict[str, int], why: str
) -> None:
    errors = mig_layout_errors(model, layout)
    assert errors, "the layout should be refused"
    assert any(why in error for error in errors), errors


def test_every_table_fits_the_seven_compute_and_eight_memory_slices() -> None:
    for model, table in MIG_PROFILES.items():
        for profile in table.values():
            assert profile.compute_slices <= 7, (model, profile)
            assert profile.memory_slices <= 8, (model, profile)
            assert profile.name.startswith(f"{profile.compute_slices}g."), (model, profile)
