"""U2: the utilisation figures and the Utilisation page at 1,000 nodes x 8 GPUs.

    DATABASE_URL=postgres://.../scratch python benchmarks/utilization_page.py --hours 6 --json

Migrates the (scratch) database named by ``DATABASE_URL``, then makes through the actions a
pool of ``--nodes`` nodes of ``--gpus`` GPUs, ``--tenants`` teams of one queue each, and
``--workloads`` workloads of ``--size`` GPUs each (6,000 GPUs held by default: three in four),
running for the last ``--hours`` hours, each with one activity window a minute as the loop's
sampler writes them (a third busy, a third half busy, a third idle). Times, with the number
of database queries each sent: the figures before any roll-up (every hour read from the
windows), the roll-up of those hours, the figures again (hours from the roll-up), the
Utilisation page as an admin (Django's test client), and a retention run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpupool.settings")
os.environ.setdefault("SECRET_KEY", "u2-benchmark-not-a-secret")


def timed(step: Callable[[], Any]) -> dict[str, Any]:
    """Wall and process CPU seconds of ``step`` and the queries it sent."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        wall, cpu = time.perf_counter(), time.process_time()
        step()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "queries": len(queries)}


def seed(options: argparse.Namespace) -> Any:
    """The pool, its teams and its running work with a window a minute; returns now."""
    from decimal import Decimal

    from django.utils import timezone

    from gpupool.accounting.actions import do_open_usage
    from gpupool.inventory.actions import do_save_flavor, do_sync_node
    from gpupool.inventory.models import Flavor
    from gpupool.quotas.actions import do_save_priority_class, do_save_queue
    from gpupool.quotas.models import PriorityClass, Queue
    from gpupool.tenancy.actions import do_save_tenant
    from gpupool.tenancy.models import Tenant
    from gpupool.utilization.actions import WindowValues, do_record_activity
    from gpupool.workloads.actions import PodSetSpec, do_submit_workload

    now = timezone.now().replace(second=0, microsecond=0)
    start = now - timedelta(hours=options.hours)
    h100 = do_save_flavor(
        Flavor(name="h100", gpu_memory_gb=80, hourly_price=Decimal(2)), acting_user=None
    )
    for index in range(options.nodes):
        do_sync_node(f"node-{index:04d}", flavor=h100, gpus=options.gpus, cpu=192, memory_gb=2048)
    do_save_priority_class(PriorityClass(name="normal", value=0, default=True), acting_user=None)
    root = do_save_queue(Queue(name="root"), acting_user=None)
    queues = []
    for index in range(options.tenants):
        team = do_save_tenant(
            Tenant(name=f"team-{index:02d}", organization="org"),
            namespaces=(f"team-{index:02d}",),
            acting_user=None,
        )
        queues.append(
            do_save_queue(
                Queue(name=f"team-{index:02d}", parent=root, tenant=team), acting_user=None
            )
        )
    workloads = []
    for index in range(options.workloads):
        queue = queues[index % len(queues)]
        sets = [PodSetSpec(1, gpus=options.size, flavor=h100)]
        job = do_submit_workload(f"job-{index:05d}", queue=queue, pod_sets=sets, at=start)
        do_open_usage(job, flavor=h100, gpus=options.size, at=start)
        workloads.append((job, queue, (0.95, 0.5, 0.0)[index % 3]))
    for minute in range(options.hours * 60):
        begins = start + timedelta(minutes=minute)
        do_record_activity(
            [
                WindowValues(
                    workload_id=job.pk,
                    tenant_id=queue.tenant_id,
                    queue_id=queue.pk,
                    started_at=begins,
                    ended_at=begins + timedelta(minutes=1),
                    gpus=options.size,
                    observed_gpu_seconds=60.0 * options.size,
                    active_gpu_seconds=60.0 * options.size * busy,
                    mean_utilization=80.0 * busy,
                    last_active_at=begins + timedelta(minutes=1) if busy else None,
                )
                for job, queue, busy in workloads
            ]
        )
    return now


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--workloads", type=int, default=750)
    parser.add_argument("--size", type=int, default=8, help="GPUs per workload")
    parser.add_argument("--hours", type=int, default=6)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--again",
        action="store_true",
        help="measure the page again on a database this script seeded before (no seeding)",
    )
    options = parser.parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from gpupool.accounting.actions import do_roll_up_usage
    from gpupool.utilization.actions import do_prune_activity
    from gpupool.utilization.models import ActivityWindow
    from gpupool.utilization.queries import (
        hourly_utilization,
        queue_waste,
        tenant_utilization,
        top_wasters,
    )

    settings.DEBUG = False
    settings.ALLOWED_HOSTS = ["*"]
    call_command("migrate", verbosity=0)
    began = time.perf_counter()
    if options.again:
        from django.db.models import Max

        now = ActivityWindow.objects.aggregate(last=Max("ended_at"))["last"]
    else:
        now = seed(options)
    seeded_s = time.perf_counter() - began
    since = now - timedelta(hours=options.hours)

    def figures() -> None:
        tenant_utilization(since, now)
        top_wasters(since, now, 10)
        queue_waste(since, now, 10)
        hourly_utilization(since, now)

    admin = get_user_model().objects.filter(username="u2-admin").first() or (
        get_user_model().objects.create_superuser("u2-admin", "", "u2-admin")
    )
    client = Client()
    client.force_login(admin)
    window = f"{options.hours}h" if options.hours in (6, 24) else "7d"

    def page() -> None:
        answer = client.get(f"/utilization/?window={window}", HTTP_HOST="127.0.0.1")
        assert answer.status_code == 200, answer.status_code

    result = {
        "nodes": options.nodes,
        "gpus": options.nodes * options.gpus,
        "workloads": options.workloads,
        "windows": ActivityWindow.objects.count(),
        "seed_s": round(seeded_s, 1),
        "figures_unrolled": None if options.again else timed(figures),
        "roll_up": timed(lambda: do_roll_up_usage(until=now)),
        "figures_rolled": timed(figures),
        "page_admin": timed(page),
        "page_admin_again": timed(page),
        "prune_batch": timed(lambda: do_prune_activity(before=now, batch=10_000, batches=1)),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    print(json.dumps(result, indent=None if options.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
