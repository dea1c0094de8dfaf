"""MIG layouts follow NVIDIA's fixed profile tables: known profiles, limits, slices, start slots.

Every case was checked by hand against NVIDIA's MIG user guide ("Supported MIG Profiles" and
the ``nvidia-smi mig -lgipp`` placements: 1g {0..6}:1, 1g double-memory {0,2,4,6}:2,
2g {0,2,4}:2, 3g {0,4}:4, 4g {0}:4, 7g {0}:8).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping

import pytest
from scheduler_builders import node, pool, queue, scenario

from gpupool.scheduler.mig import (
    COMPUTE_SLICES_PER_GPU,
    MEMORY_SLICES_PER_GPU,
    MIG_PROFILES,
    MigInstancePlacement,
    MigProfile,
    mig_layout_errors,
    mig_placement,
    mig_profile,
)
from gpupool.scheduler.scenario import scenario_from_dict

VALID = [
    ("seven 1g slices", "A100-40GB", {"1g.5gb": 7}),
    ("four double-memory 1g slices", "A100-40GB", {"1g.10gb": 4}),
    ("two 3g halves", "A100-40GB", {"3g.20gb": 2}),
    ("4g + 2g + 1g", "A100-40GB", {"4g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1}),
    ("4g + three 1g", "A100-40GB", {"4g.20gb": 1, "1g.5gb": 3}),
    ("4g at slot 0 + 3g at slot 4", "A100-40GB", {"4g.20gb": 1, "3g.20gb": 1}),
    ("3g at slot 4 + two 2g below it", "A100-40GB", {"3g.20gb": 1, "2g.10gb": 2}),
    ("3g at slot 4 + four 1g below it", "A100-40GB", {"3g.20gb": 1, "1g.5gb": 4}),
    ("three 2g + 1g at slot 6", "A100-40GB", {"2g.10gb": 3, "1g.5gb": 1}),
    ("three 2g + double-memory 1g at 6", "A100-40GB", {"2g.10gb": 3, "1g.10gb": 1}),
    ("one media-extension 1g + six 1g", "A100-40GB", {"1g.5gb+me": 1, "1g.5gb": 6}),
    ("the whole card", "A100-40GB", {"7g.40gb": 1}),
    ("A100 80GB halves", "A100-80GB", {"3g.40gb": 2}),
    ("H100 three 2g + 1g", "H100-80GB", {"2g.20gb": 3, "1g.10gb": 1}),
    ("H100 four double-memory 1g", "H100-80GB", {"1g.20gb": 4}),
    ("H100 94GB 4g + 3g", "H100-94GB", {"4g.47gb": 1, "3g.47gb": 1}),
    ("H200 seven 1g", "H200-141GB", {"1g.18gb": 7}),
    ("H200 2g + five 1g", "H200-141GB", {"2g.35gb": 1, "1g.18gb": 5}),
    ("lower-case model name", "h100-80gb", {"7g.80gb": 1}),
]

INVALID = [
    ("profile of another card", "A100-40GB", {"3g.40gb": 1}, "unknown profile '3g.40gb'"),
    ("H200 has no 1g.20gb", "H200-141GB", {"1g.20gb": 1}, "unknown profile '1g.20gb'"),
    ("eight 1g slices", "A100-40GB", {"1g.5gb": 8}, "exceeds the card's limit of 7"),
    ("two media extensions", "A100-40GB", {"1g.5gb+me": 2}, "exceeds the card's limit of 1"),
    ("five double-memory 1g", "A100-80GB", {"1g.20gb": 5}, "exceeds the card's limit of 4"),
    ("4g + two 2g", "A100-40GB", {"4g.20gb": 1, "2g.10gb": 2}, "8 compute slices"),
    ("two 3g + double 1g", "A100-40GB", {"3g.20gb": 2, "1g.10gb": 1}, "10 memory slices"),
    ("whole card + 1g", "H100-80GB", {"7g.80gb": 1, "1g.10gb": 1}, "8 compute slices"),
    ("empty layout", "H100-80GB", {}, "empty"),
    ("zero instances", "H100-80GB", {"1g.10gb": 0}, "positive whole number"),
    ("true is not a count", "H100-80GB", {"1g.10gb": True}, "positive whole number"),
    ("a string is not a count", "H100-80GB", {"1g.10gb": "2"}, "positive whole number"),
    ("a card without MIG tables", "B300", {"1g.10gb": 1}, "unknown MIG GPU model"),
]


@pytest.mark.parametrize(("name", "model", "layout"), VALID, ids=[case[0] for case in VALID])
def test_a_layout_the_guide_allows_is_accepted_and_placed(
    name: str, model: str, layout: dict[str, int]
) -> None:
    assert mig_layout_errors(model, layout) == []
    placed = mig_placement(model, layout)
    assert placed is not None
    assert sorted(p.profile for p in placed) == sorted(
        profile for profile, count in layout.items() for _ in range(count)
    )


@pytest.mark.parametrize(
    ("name", "model", "layout", "why"), INVALID, ids=[case[0] for case in INVALID]
)
def test_a_layout_the_guide_forbids_is_refused_and_says_why(
    name: str, model: str, layout: dict[str, object], why: str
) -> None:
    errors = mig_layout_errors(model, layout)
    assert any(why in error for error in errors), errors


def test_the_3g_instance_goes_to_slot_4_when_two_2g_need_the_lower_half() -> None:
    placed = mig_placement("A100-40GB", {"3g.20gb": 1, "2g.10gb": 2})
    assert placed is not None
    assert set(placed) == {
        MigInstancePlacement("3g.20gb", 4),
        MigInstancePlacement("2g.10gb", 0),
        MigInstancePlacement("2g.10gb", 2),
    }


def test_a_double_memory_1g_instance_takes_the_last_slot_pair() -> None:
    placed = mig_placement("A100-40GB", {"2g.10gb": 3, "1g.10gb": 1})
    assert placed is not None
    assert MigInstancePlacement("1g.10gb", 6) in placed


def test_no_placement_for_unknown_profiles_or_layouts_over_the_card() -> None:
    assert mig_placement("A100-40GB", {"9g.90gb": 1}) is None
    assert mig_placement("B300", {"1g.10gb": 1}) is None
    assert mig_placement("A100-40GB", {"4g.20gb": 1, "3g.20gb": 2}) is None
    assert mig_placement("A100-40GB", {"1g.5gb": 8}) is None


def _layouts_within_limits(table: Mapping[str, MigProfile]) -> Iterator[dict[str, int]]:
    """Every non-empty layout that respects each profile's per-card instance limit."""
    profiles = list(table.values())
    for counts in itertools.product(*(range(p.max_instances + 1) for p in profiles)):
        layout = {p.name: c for p, c in zip(profiles, counts, strict=True) if c}
        if layout:
            yield layout


@pytest.mark.parametrize("model", sorted(MIG_PROFILES))
def test_every_placement_uses_allowed_slots_without_overlap(model: str) -> None:
    """Exhaustive over each card: placements obey the start slots and never share a slice."""
    table = MIG_PROFILES[model]
    for layout in _layouts_within_limits(table):
        placed = mig_placement(model, layout)
        compute = sum(table[n].compute_slices * c for n, c in layout.items())
        memory = sum(table[n].memory_slices * c for n, c in layout.items())
        fits = compute <= COMPUTE_SLICES_PER_GPU and memory <= MEMORY_SLICES_PER_GPU
        # On these cards the start slots refuse nothing the slice totals allow.
        assert (placed is not None) == fits, layout
        if placed is None:
            continue
        used_memory: list[int] = []
        used_compute: list[int] = []
        for instance in placed:
            profile = table[instance.profile]
            assert instance.start_slot in profile.start_slots, (layout, instance)
            used_memory += range(instance.start_slot, instance.start_slot + profile.memory_slices)
            end = min(instance.start_slot + profile.compute_slices, COMPUTE_SLICES_PER_GPU)
            used_compute += range(instance.start_slot, end)
        assert len(used_memory) == len(set(used_memory)), (layout, placed)
        assert len(used_compute) == len(set(used_compute)), (layout, placed)
        assert max(used_memory) < MEMORY_SLICES_PER_GPU


def test_every_table_has_the_guides_slice_structure() -> None:
    for model, table in MIG_PROFILES.items():
        for profile in table.values():
            assert profile.name.startswith(f"{profile.compute_slices}g."), (model, profile)
            assert profile.name.split(".")[1].startswith(f"{profile.memory_gb}gb"), profile
            assert profile.compute_slices <= COMPUTE_SLICES_PER_GPU
            assert profile.memory_slices <= MEMORY_SLICES_PER_GPU
            # The per-card limit equals the number of start slots of the profile's size.
            assert profile.max_instances == (
                1 if profile.name.endswith("+me") else len(profile.start_slots)
            ), profile


def test_profile_lookup_ignores_the_case_of_the_card_name() -> None:
    assert mig_profile("a100-40gb", "3g.20gb") == mig_profile("A100-40GB", "3g.20gb")
    assert mig_profile("a100-40gb", "3g.40gb") is None


def test_a_scenario_reads_a_mig_flavor_of_the_h100_94gb_table() -> None:
    """The scenario reader uses the same tables: an H100 94GB 3g slice flavor is accepted."""
    data = scenario(pool(1), [queue("team-a", deserved=8, capability=16)], [])
    data["flavors"].append(
        {"name": "h100-3g", "mig": {"gpu_model": "h100-94gb", "profile": "3g.47gb"}}
    )
    data["nodes"].append({**node("m1", gpus=4, flavor="h100-3g"), "physical_gpus": 2})
    assert scenario_from_dict(data).snapshot.nodes[-1].gpus == 4
