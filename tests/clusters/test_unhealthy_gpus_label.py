"""The label ``gpupool.io/unhealthy-gpus`` names the GPUs a health source knows broken
(indices joined by ``_``): read back as written, each index once; a part that is no index
is skipped, and no label names none."""

from __future__ import annotations

from gpupool.clusters.inventory import (
    UNHEALTHY_GPUS_LABEL,
    named_unhealthy_gpus,
    unhealthy_gpus_label,
)


def test_the_label_reads_back_the_indices_it_was_written_with() -> None:
    value = unhealthy_gpus_label([5, 2, 5])
    assert value == "2_5"
    assert named_unhealthy_gpus({UNHEALTHY_GPUS_LABEL: value}) == (2, 5)


def test_a_part_that_is_no_index_is_skipped_and_no_label_names_none() -> None:
    assert named_unhealthy_gpus({UNHEALTHY_GPUS_LABEL: "3_x_-1__3_"}) == (3,)
    assert named_unhealthy_gpus({}) == ()
    assert named_unhealthy_gpus({UNHEALTHY_GPUS_LABEL: ""}) == ()
