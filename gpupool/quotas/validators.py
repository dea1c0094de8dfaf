"""Rules for names that reach Kubernetes as label values, and for quota amounts a flavor can
hold.

A queue's name is the value of its pods' ``gpupool.io/queue`` label (DESIGN §4), so it must be
a valid Kubernetes label value, or a pod could not name it at all. A priority class's name
follows the same rule: pods name it beside the queue (``gpupool.io/priority-class``), and one
rule for both keeps the names a team writes into its pod specs alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING

from django.core.validators import RegexValidator

from gpupool.inventory.choices import Sharing
from gpupool.number_formats import GPU_PLACES, plain_number

if TYPE_CHECKING:
    from gpupool.inventory.models import Flavor

MAX_LABEL_VALUE_LENGTH = 63

# Kubernetes' label value (apimachinery's IsValidLabelValue), without the empty value: a
# letter or digit, then up to 61 letters, digits, '-', '_' or '.', ending with a letter or
# digit; at most 63 characters in all.
LABEL_VALUE_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z"

validate_label_value = RegexValidator(
    LABEL_VALUE_PATTERN,
    "Enter a Kubernetes label value: 1 to 63 letters, digits, '-', '_' or '.', starting and "
    "ending with a letter or digit (e.g. nlp-train or team_a.eval).",
)


# What one unit of a flavor given whole is, for the messages (shared flavors take fractions).
WHOLE_UNITS: dict[str, str] = {Sharing.EXCLUSIVE: "whole GPUs", Sharing.MIG: "whole MIG instances"}


def whole_gpu_errors(flavor: Flavor, levels: Mapping[str, Decimal | None]) -> dict[str, str]:
    """``{level: why}`` for each quota level of ``levels`` that is not a whole number on a
    ``flavor`` whose GPUs are handed to pods whole (DESIGN §2: an ``exclusive`` flavor's pods
    ask for whole GPUs, a MIG flavor's for whole instances of its profile). Half a GPU of such
    a flavor can be neither guaranteed to nor used by any pod, so a fraction there is a typo,
    not a quota. Only ``shared`` flavors count fractions (``gpu_milli / 1000`` per pod).
    Nothing for a shared flavor or a missing level (it has its own error)."""
    units = WHOLE_UNITS.get(flavor.sharing)
    if units is None:
        return {}
    return {
        level: f"{level} {plain_number(value, GPU_PLACES)} is not a whole number: flavor "
        f"{flavor.name} ({flavor.sharing}) gives {units}, so its quotas are whole numbers "
        f"(only shared flavors take fractions)"
        for level, value in levels.items()
        if value is not None and Decimal(value) != Decimal(value).to_integral_value()
    }
