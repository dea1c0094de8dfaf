"""Placement quality on the openb trace: an array cluster, placement policies, their replay,
the packing bound, the FGD paper's own results, and the sweep over traces and seeds (B2)."""
