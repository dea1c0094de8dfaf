"""Rules for names that reach Kubernetes as label values.

A queue's name is the value of its pods' ``gpupool.io/queue`` label (DESIGN §4), so it must be
a valid Kubernetes label value, or a pod could not name it at all. A priority class's name
follows the same rule: pods name it beside the queue (``gpupool.io/priority-class``), and one
rule for both keeps the names a team writes into its pod specs alike.
"""

from __future__ import annotations

from django.core.validators import RegexValidator

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
