"""NVIDIA Multi-Instance GPU (MIG) profile tables and layout validation, stdlib only.

The single source of truth for MIG in gpupool: the decision core's scenario reader and the
inventory app both ask this module. Facts are from NVIDIA's *Multi-Instance GPU User Guide*
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/, sections "Supported MIG Profiles"
and "Getting Started with MIG" / ``nvidia-smi mig -lgipp``).

A MIG-capable card has 7 compute slices and 8 memory slices. A GPU instance of a profile
(``3g.20gb``: 3 compute slices, 4 of the 8 memory slices, 20 GB) occupies a contiguous run of
memory slices that must begin at one of the profile's allowed start slots, and the compute
slices beginning at the same slot. ``nvidia-smi mig -lgipp`` prints those rules as
``{starts}:size``; they are the same on A100, H100 and H200:

====================  ===================  ===========
profile (A100-40GB)   start slots          size
====================  ===================  ===========
1g.5gb, 1g.5gb+me     0, 1, 2, 3, 4, 5, 6  1
1g.10gb               0, 2, 4, 6           2
2g.10gb               0, 2, 4              2
3g.20gb               0, 4                 4
4g.20gb               0                    4
7g.40gb               0                    8
====================  ===================  ===========

A layout (profile name -> instances on one card) is valid when every profile is known for the
card, no profile exceeds its per-card instance limit, the compute and memory slices fit, and
the instances can all be placed at allowed start slots without overlapping. The search places
largest instances first and backtracks: ``3g.20gb + 2 x 2g.10gb`` only fits with the 3g
instance at slot 4. For the five tables below an exhaustive check (tests/scheduler/test_mig.py)
shows that, once the instance limits and slice totals hold, a placement always exists, so
``mig_placement`` refuses nothing more on these cards today; it stays as the rule that a table
with tighter slots would need, and it tells the caller where each instance goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

COMPUTE_SLICES_PER_GPU = 7
MEMORY_SLICES_PER_GPU = 8


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile of one card: slices, memory, per-card instance limit and start slots."""

    name: str
    compute_slices: int
    memory_slices: int
    memory_gb: int
    max_instances: int
    start_slots: tuple[int, ...]


@dataclass(frozen=True)
class MigInstancePlacement:
    """Where one instance of a layout sits on the card: its profile and first memory slice."""

    profile: str
    start_slot: int


# Start slots by compute slices and memory slices (the -lgipp rules, identical on all cards).
_START_SLOTS: Mapping[tuple[int, int], tuple[int, ...]] = {
    (1, 1): (0, 1, 2, 3, 4, 5, 6),
    (1, 2): (0, 2, 4, 6),
    (2, 2): (0, 2, 4),
    (3, 4): (0, 4),
    (4, 4): (0,),
    (7, 8): (0,),
}


def _card(*memory_gb: int) -> dict[str, MigProfile]:
    """The profile table of a card from its seven memory sizes (1g, 1g+me, 1g-double ... 7g)."""
    one, one_me, one_double, two, three, four, seven = memory_gb
    rows = [
        (f"1g.{one}gb", 1, 1, one, 7),
        (f"1g.{one_me}gb+me", 1, 1, one_me, 1),
        (f"1g.{one_double}gb", 1, 2, one_double, 4),
        (f"2g.{two}gb", 2, 2, two, 3),
        (f"3g.{three}gb", 3, 4, three, 2),
        (f"4g.{four}gb", 4, 4, four, 1),
        (f"7g.{seven}gb", 7, 8, seven, 1),
    ]
    return {
        name: MigProfile(name, compute, memory, gb, limit, _START_SLOTS[(compute, memory)])
        for name, compute, memory, gb, limit in rows
    }


# NVIDIA MIG User Guide, "Supported MIG Profiles" (A100: profile names scale with memory;
# H100-94GB and H200-141GB have the same slice structure with their own memory sizes).
MIG_PROFILES: Mapping[str, Mapping[str, MigProfile]] = {
    "A100-40GB": _card(5, 5, 10, 10, 20, 20, 40),
    "A100-80GB": _card(10, 10, 20, 20, 40, 40, 80),
    "H100-80GB": _card(10, 10, 20, 20, 40, 40, 80),
    "H100-94GB": _card(12, 12, 24, 24, 47, 47, 94),
    "H200-141GB": _card(18, 18, 35, 35, 71, 71, 141),
}


def mig_gpu_models() -> list[str]:
    """The card models with a known MIG profile table, sorted."""
    return sorted(MIG_PROFILES)


def mig_profiles(gpu_model: str) -> Mapping[str, MigProfile] | None:
    """The profile table of ``gpu_model`` (case-insensitive: ``a100-40gb`` works), or None."""
    return MIG_PROFILES.get(gpu_model.upper())


def mig_profile(gpu_model: str, profile: str) -> MigProfile | None:
    """The profile ``profile`` of card ``gpu_model``, or None if either is unknown."""
    table = mig_profiles(gpu_model)
    return None if table is None else table.get(profile)


def mig_placement(
    gpu_model: str, layout: Mapping[str, int]
) -> tuple[MigInstancePlacement, ...] | None:
    """A placement of every instance of ``layout`` on one card, or None if none exists."""
    table = mig_profiles(gpu_model)
    if table is None or any(name not in table or count < 0 for name, count in layout.items()):
        return None
    # Largest first; instances of one profile take increasing slots (no symmetric retries).
    instances = sorted(
        (table[name] for name, count in layout.items() for _ in range(count)),
        key=lambda p: (-p.memory_slices, -p.compute_slices, p.name),
    )
    memory_used = [False] * MEMORY_SLICES_PER_GPU
    compute_used = [False] * COMPUTE_SLICES_PER_GPU
    chosen: list[MigInstancePlacement] = []

    def place(index: int, lowest_slot: int) -> bool:
        if index == len(instances):
            return True
        profile = instances[index]
        for start in profile.start_slots:
            if start < lowest_slot:
                continue
            memory = range(start, start + profile.memory_slices)
            compute = range(start, min(start + profile.compute_slices, COMPUTE_SLICES_PER_GPU))
            if any(memory_used[i] for i in memory) or any(compute_used[i] for i in compute):
                continue
            for i in memory:
                memory_used[i] = True
            for i in compute:
                compute_used[i] = True
            chosen.append(MigInstancePlacement(profile.name, start))
            following = instances[index + 1] if index + 1 < len(instances) else None
            next_lowest = start + 1 if following == profile else 0
            if place(index + 1, next_lowest):
                return True
            chosen.pop()
            for i in memory:
                memory_used[i] = False
            for i in compute:
                compute_used[i] = False
        return False

    return tuple(chosen) if place(0, 0) else None


def mig_layout_errors(gpu_model: str, layout: Mapping[str, object]) -> list[str]:
    """Why ``layout`` (profile -> instances per card) is invalid for ``gpu_model``; [] if valid."""
    table = mig_profiles(gpu_model)
    if table is None:
        return [f"unknown MIG GPU model {gpu_model!r}; known: {', '.join(mig_gpu_models())}"]
    if not layout:
        return ["the layout is empty; a MIG card needs at least one instance"]
    errors: list[str] = []
    counts: dict[str, int] = {}
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
        counts[name] = count
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
    if not errors and mig_placement(gpu_model, counts) is None:
        errors.append(
            "the slices fit but the instances cannot be placed on the card: "
            "each profile may only start at its allowed slots (nvidia-smi mig -lgipp)"
        )
    return errors
