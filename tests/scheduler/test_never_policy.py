"""``preemption_policy: Never`` never causes an eviction, neither preempt nor reclaim (issue 13,
item 6; DESIGN section 5's invariant).

Kubernetes refuses a pod with ``preemptionPolicy: Never`` as a preemptor
(``PodEligibleToPreemptOthers``), and Volcano's reclaim action skips such a task before it
looks for victims: a class that says Never waits for capacity to free by itself.
"""

from __future__ import annotations

import pytest
from scheduler_builders import Case, pool, queue, run_case, workload

FULL = list(range(8))

CASES = [
    Case(
        "a Never-policy workload below its queue's deserved share reclaims nothing",
        pool(2),
        [queue("first", deserved=8, capability=16), queue("second", deserved=8, capability=16)],
        [
            workload("f1", "first", on=[("n1", FULL)], started="08:00"),
            workload("f2", "first", on=[("n2", FULL)], started="09:00"),
            workload("s1", "second", priority="interactive"),
        ],
        want_not_admitted={"s1"},
        want_reasons={"s1": "capacity"},
    ),
    Case(
        "a Never-policy workload takes no fair-share reclaim either",
        pool(4),
        [queue("first", deserved=8, capability=32), queue("second", deserved=4, capability=16)],
        [
            workload("f1", "first", on=[("n1", FULL)], started="07:00"),
            workload("f2", "first", on=[("n2", FULL)], started="08:00"),
            workload("f3", "first", on=[("n3", FULL)], started="09:00"),
            workload("s-run", "second", on=[("n4", FULL)], started="08:00"),
            workload("s2", "second", gpus=4, priority="interactive"),
        ],
        want_not_admitted={"s2"},
    ),
    Case(
        "a workload of a reclaiming class still reclaims where a Never one would not",
        pool(2),
        [queue("first", deserved=8, capability=16), queue("second", deserved=8, capability=16)],
        [
            workload("f1", "first", on=[("n1", FULL)], started="08:00"),
            workload("f2", "first", on=[("n2", FULL)], started="09:00"),
            workload("s1", "second"),
        ],
        want_evicted={"f2": "reclaim"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_never_class_causes_no_eviction(case: Case) -> None:
    """No victim is evicted on behalf of a workload whose class says Never."""
    run_case(case)
