"""NVIDIA Multi-Instance GPU (MIG) profile tables and layout validation. Pure Python.

A MIG-capable card is cut into at most 7 compute slices and 8 memory slices. Each profile
(``3g.20gb``: 3 compute slices, 20 GB) takes a fixed number of each, and may appear at most a
fixed number of times per card. The tables follow NVIDIA's MIG user guide for the cards the
pool supports. A layout is valid when every profile is known for the card, no profile exceeds
its per-card instance limit, and the slices add up to no more than the card has.

Not modelled: the guide's placement (start-slot) rules, which reject a few combinations whose
slice totals fit; the GPU operator's ``mig-parted`` applies those when it partitions the card.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

COMPUTE_SLICES_PER_GPU = 7
MEMORY_SLICES_PER_GPU = 8


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile of one card: its slices, memory and per-card instance limit."""

    name: str
    compute_slices: int
    memory_slices: int
    memory_gb: int
    max_instances: int


def _table(*rows: tuple[str, int, int, int, int]) -> dict[str, MigProfile]:
    return {row[0]: MigProfile(*row) for row in rows}


# name, compute slices, memory slices (of 8), memory GB, max instances per card.
MIG_PROFILES: dict[str, dict[str, MigProfile]] = {
    "A100-40GB": _table(
        ("1g.5gb", 1, 1, 5, 7),
        ("1g.5gb+me", 1, 1, 5, 1),
        ("1g.10gb", 1, 2, 10, 4),
        ("2g.10gb", 2, 2, 10, 3),
        ("3g.20gb", 3, 4, 20, 2),
        ("4g.20gb", 4, 4, 20, 1),
        ("7g.40gb", 7, 8, 40, 1),
    ),
    "A100-80GB": _table(
        ("1g.10gb", 1, 1, 10, 7),
        ("1g.10gb+me", 1, 1, 10, 1),
        ("1g.20gb", 1, 2, 20, 4),
        ("2g.20gb", 2, 2, 20, 3),
        ("3g.40gb", 3, 4, 40, 2),
        ("4g.40gb", 4, 4, 40, 1),
        ("7g.80gb", 7, 8, 80, 1),
    ),
    "H100-80GB": _table(
        ("1g.10gb", 1, 1, 10, 7),
        ("1g.10gb+me", 1, 1, 10, 1),
        ("1g.20gb", 1, 2, 20, 4),
        ("2g.20gb", 2, 2, 20, 3),
        ("3g.40gb", 3, 4, 40, 2),
        ("4g.40gb", 4, 4, 40, 1),
        ("7g.80gb", 7, 8, 80, 1),
    ),
}


def mig_gpu_models() -> list[str]:
    """The card models with a known MIG profile table, sorted."""
    return sorted(MIG_PROFILES)


def mig_profile(gpu_model: str, profile: str) -> MigProfile | None:
    """The profile ``profile`` of card ``gpu_model``, or None if either is unknown."""
    return MIG_PROFILES.get(gpu_model, {}).get(profile)


def mig_layout_errors(gpu_model: str, layout: Mapping[str, object]) -> list[str]:
    """Why ``layout`` (profile -> instances per card) is invalid for ``gpu_model``; [] if valid."""
    table = MIG_PROFILES.get(gpu_model)
    if table is None:
        return [f"unknown MIG GPU model {gpu_model!r}; known: {', '.join(mig_gpu_models())}"]
    if not layout:
        return ["the layout is empty; a MIG card needs at least one instance"]
    errors: list[str] = []
    compute = memory = 0
    for name, count in sorted(layout.items()):
        profile = table.get(name)
        if profile is None:
            errors.append(f"unknown profile {name!r} for {gpu_model}; known: {', '.join(table)}")
            continue
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            errors.append(f"profile {name!r} needs a positive whole number of instances")
            continue
        if count > profile.max_instances:
            errors.append(
                f"{count} x {name} exceeds the card's limit of {profile.max_instances} instances"
            )
        compute += count * profile.compute_slices
        memory += count * profile.memory_slices
    if compute > COMPUTE_SLICES_PER_GPU:
        errors.append(
            f"the layout uses {compute} compute slices; a {gpu_model} has {COMPUTE_SLICES_PER_GPU}"
        )
    if memory > MEMORY_SLICES_PER_GPU:
        errors.append(
            f"the layout uses {memory} memory slices; a {gpu_model} has {MEMORY_SLICES_PER_GPU}"
        )
    return errors
