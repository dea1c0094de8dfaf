"""The demo teams' submissions, made through the product: ``do_submit_workload``.

``DemoSubmitter`` turns each ``DemoSubmission`` of the generator into a workload of its
team's queue, in its team's namespace, submitted by the system at the simulated time it is
due. Its pods run ``sleep <run time>`` (the simulated kubelet ends them after exactly that),
and the workload declares the generator's estimate of it, or none. ``run_generator`` is the
demo's generator process: it waits on the cluster's clock (sped up) and submits what is due
until it is told to stop.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from django.core.exceptions import ValidationError

from gpupool.clusters.simulated import Clock
from gpupool.inventory.models import Flavor, healthy_capacity
from gpupool.quotas.models import PriorityClass, Queue
from gpupool.simulation.workload_generator import (
    DemoChoices,
    DemoSubmission,
    WorkloadGenerator,
    WorkloadMix,
    rate_scale,
)
from gpupool.workloads.actions import PodSetSpec, do_submit_workload
from gpupool.workloads.models import Workload

logger = logging.getLogger(__name__)
GENERATED_NAME = re.compile(r"^(train|notebook)-(\d+)$")
DEMO_IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"  # never pulled: the simulated kubelet runs it
# Its workloads' first transition: no person submitted them, the generator did.
SUBMITTED_BY_GENERATOR = "submitted by the demo generator"


def demo_team_queues() -> dict[str, Queue]:
    """Leaf queues of tenants named after a namespace they own: the teams that submit."""
    queues = Queue.objects.filter(tenant__isnull=False, children__isnull=True).select_related(
        "tenant"
    )
    return {
        q.tenant.name: q
        for q in queues
        if q.tenant is not None and q.tenant.name in q.tenant.namespace_names()
    }


def pool_gpus() -> float:
    """The pool's healthy GPUs (MIG instances as one each, as jobs ask for them)."""
    return float(sum((healthy_capacity(f) for f in Flavor.objects.all()), Decimal(0)))


@dataclass
class DemoSubmitter:
    """Submits the generator's workloads through the actions (see the module docstring)."""

    queues: dict[str, Queue]
    choices: DemoChoices

    def __post_init__(self) -> None:
        self.flavors = {flavor.name: flavor for flavor in Flavor.objects.all()}
        self.classes = {pc.name: pc for pc in PriorityClass.objects.all()}
        # A restarted demo goes on numbering after the workloads its teams already have.
        self.offsets = dict.fromkeys(self.queues, 0)
        for namespace, name in Workload.objects.filter(namespace__in=list(self.queues)).values_list(
            "namespace", "name"
        ):
            match = GENERATED_NAME.match(name)
            if match:
                self.offsets[namespace] = max(self.offsets[namespace], int(match.group(2)))

    def submit(self, submission: DemoSubmission) -> Workload | None:
        """Submit one workload; None (and a log line) if the pool cannot take its kind."""
        flavor = self.flavors.get(submission.flavor)
        if flavor is None:
            logger.warning("demo: no flavor %s; %s skipped", submission.flavor, submission.name)
            return None
        cpu = self.choices.cpu_per_gpu.get(flavor.name, 4) * submission.gpus_per_pod
        memory = self.choices.memory_gb_per_gpu.get(flavor.name, 16) * submission.gpus_per_pod
        serial = submission.serial + self.offsets[submission.team]
        name = GENERATED_NAME.sub(lambda m: f"{m.group(1)}-{serial:05d}", submission.name)
        try:
            return do_submit_workload(
                name,
                queue=self.queues[submission.team],
                namespace=submission.team,
                pod_sets=[
                    PodSetSpec(
                        count=submission.pods,
                        gpus=submission.gpus_per_pod,
                        flavor=flavor,
                        gpu_milli=submission.gpu_milli,
                        cpu=cpu,
                        memory_gb=memory,
                        image=DEMO_IMAGE,
                        # How long it really runs: the simulated kubelet runs the sleep.
                        command=("sleep", str(int(submission.runtime_s))),
                    )
                ],
                priority_class=self.classes.get(submission.priority_class),
                topology=submission.topology,
                expected_runtime_s=submission.expected_runtime_s,
                at=datetime.fromtimestamp(submission.at, tz=UTC),
                reason=SUBMITTED_BY_GENERATOR,
            )
        except ValidationError as error:
            logger.warning("demo: %s/%s not submitted: %s", submission.team, name, error)
            return None


class DemoWorkloadFeed:
    """The generator and the submitter together: what falls due by a time gets submitted."""

    def __init__(
        self, *, seed: int, load: float, start: float, choices: DemoChoices | None = None
    ) -> None:
        choices = choices or DemoChoices()
        queues = demo_team_queues()
        if not queues:
            raise RuntimeError("no demo teams: run `gpupool seed-demo` first")
        mix = WorkloadMix.load()
        scale = rate_scale(mix, list(queues), pool_gpus(), load, choices)
        self.generator = WorkloadGenerator(
            mix, list(queues), seed=seed, start=start, scale=scale, choices=choices
        )
        self.submitter = DemoSubmitter(queues, choices)

    def submit_due(self, now: float) -> int:
        """Submit everything due by ``now``; how many were submitted."""
        made = [self.submitter.submit(s) for s in self.generator.until(now)]
        return sum(1 for workload in made if workload is not None)

    def next_at(self) -> float:
        """When the next submission falls due."""
        return self.generator.next_at()


def run_generator(
    clock: Clock,
    *,
    seed: int,
    load: float,
    speed: float,
    stop: Callable[[], bool],
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Submit the demo teams' work as it falls due on ``clock`` until ``stop()``; how many."""
    feed = DemoWorkloadFeed(seed=seed, load=load, start=clock.now())
    submitted = 0
    while not stop():
        submitted += feed.submit_due(clock.now())
        wait = (feed.next_at() - clock.now()) / speed
        sleep(min(max(wait, 0.01), 0.5))
    return submitted
