"""B3: the loader and the 30-day window, the shares, short replays and the CLI on the synthetic
sample; the published table's counts and the full run where it is found."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from gpupool.simulation.queueing.philly import (
    DAY_S,
    PhillyJob,
    deserved_shares,
    make_cluster,
    pod_sets,
    run_philly,
    tenant_shares,
    window,
)
from gpupool.simulation.report import describe_worse_than_alone


def test_the_window_keeps_each_tenants_first_days_by_arrival(
    sample_philly_jobs: list[PhillyJob],
) -> None:
    """Arrivals count from each tenant's first job; the window keeps those before day 30,
    sorted by arrival, and ``limit`` the first of them."""
    assert {job.vc for job in sample_philly_jobs if job.arrival_s == 0} == {
        job.vc for job in sample_philly_jobs
    }
    kept = window(sample_philly_jobs, 30)
    assert 0 < len(kept) < len(sample_philly_jobs)
    assert all(job.arrival_s < 30 * DAY_S for job in kept)
    assert [j.arrival_s for j in kept] == sorted(j.arrival_s for j in kept)
    assert window(sample_philly_jobs, 30, limit=5) == kept[:5]
    assert kept[0].gpu_hours == pytest.approx(kept[0].gpus * kept[0].duration_s / 3600)


def test_the_published_table_matches_its_readme(full_philly_jobs: list[PhillyJob]) -> None:
    """15,264 jobs of 15 VCs; the five largest VCs are capped at 2,000 jobs."""
    assert len(full_philly_jobs) == 15_264
    per_vc: dict[str, int] = {}
    for job in full_philly_jobs:
        per_vc[job.vc] = per_vc.get(job.vc, 0) + 1
    assert len(per_vc) == 15
    assert sorted(vc for vc, n in per_vc.items() if n == 2000) == [
        "11cb48",
        "6214e9",
        "6c71a0",
        "b436b2",
        "ee9e8c",
    ]
    assert sum(1 for job in full_philly_jobs if job.gpus == 1) == 10_480


def test_the_published_30_day_window_is_b3s(full_philly_jobs: list[PhillyJob]) -> None:
    """4,889 jobs and about 548k GPU-hours arrive in the tenants' first 30 days."""
    kept = window(full_philly_jobs, 30)
    assert len(kept) == 4889
    assert sum(job.gpu_hours for job in kept) == pytest.approx(548_178, abs=1)
    assert [j.arrival_s for j in kept] == sorted(j.arrival_s for j in kept)


def test_shares_sum_to_the_pool_and_cover_each_largest_gang(
    sample_philly_jobs: list[PhillyJob],
) -> None:
    """Deserved shares add up to 1,024 GPUs and each tenant can run its largest job alone."""
    kept = window(sample_philly_jobs, 30)
    shares = tenant_shares(kept)
    assert sum(shares.values()) == 1024
    for vc, deserved in shares.items():
        assert deserved >= max(job.gpus for job in kept if job.vc == vc)
    demand = {vc: sum(job.gpu_hours for job in kept if job.vc == vc) for vc in shares}
    assert max(shares, key=lambda vc: shares[vc]) == max(demand, key=lambda vc: demand[vc])


def test_water_filling_gives_small_tenants_their_floor() -> None:
    """A tenant whose proportional share is below its floor gets the floor; others share."""
    shares = deserved_shares({"big": 990.0, "mid": 9.0, "tiny": 1.0}, {"tiny": 8}, 100)
    assert shares == {"big": 91, "mid": 1, "tiny": 8}
    assert sum(shares.values()) == 100


def test_each_queue_is_weighted_by_its_deserved_gpus() -> None:
    """The B3 pool weighs each tenant's queue by its deserved GPUs (weighted DRF)."""
    cluster = make_cluster({"big": 24, "small": 8}, 32)
    weights = {q.name: q.weight for q in cluster.queues if q.parent == "root"}
    assert weights == {"vc-big": 24.0, "vc-small": 8.0}


def test_equal_queue_weights_remain_available_for_comparison() -> None:
    """``queue_weights="equal"`` gives every queue weight 1; an unknown mode is refused."""
    cluster = make_cluster({"big": 24, "small": 8}, 32, queue_weights="equal")
    assert {q.weight for q in cluster.queues} == {1.0}
    with pytest.raises(ValueError, match="queue_weights"):
        make_cluster({"big": 24}, 24, queue_weights="demand")


@pytest.mark.parametrize(
    ("gpus", "pods"), [(1, (1, 1)), (8, (1, 8)), (16, (2, 8)), (12, (2, 6)), (20, (4, 5))]
)
def test_gangs_become_pods_of_at_most_a_node(gpus: int, pods: tuple[int, int]) -> None:
    """Gangs over 8 GPUs are split into equal pods of at most 8 GPUs."""
    (pod_set,) = pod_sets(gpus)
    assert (pod_set.count, pod_set.gpus) == pods


def test_a_short_run_is_deterministic(sample_philly_jobs: list[PhillyJob]) -> None:
    """The same jobs give the same figures, run after run."""
    first = run_philly(limit=60, jobs=sample_philly_jobs).to_json()
    second = run_philly(limit=60, jobs=sample_philly_jobs).to_json()
    first.pop("elapsed_s")
    second.pop("elapsed_s")
    for entry in (*first["policies"].values(), *second["policies"].values()):
        entry.pop("plan_s")
    assert first == second
    assert set(first["policies"]) == {"fifo", "kueue-like", "gpupool"}
    assert first["settings"]["fifo"]["queueing"] == "fifo"
    assert first["settings"]["kueue-like"]["queue_order"] == "head-rank"
    assert first["settings"]["kueue-like"]["fair_reclaim"] is False
    assert first["settings"]["gpupool"]["queue_order"] == "dominant-share"
    assert first["settings"]["gpupool"]["fair_reclaim"] is True
    assert first["settings"]["gpupool"]["protected_runtime_s"] == 1800
    assert first["jobs"] == 60
    assert first["queue_weights"] == "deserved"


@pytest.mark.usefixtures("sample_data")
def test_simulate_philly_prints_the_b3_json() -> None:
    """``simulate philly --json`` has per policy the B3 keys and per tenant the alone wait."""
    out = StringIO()
    call_command(
        "gpupool",
        "simulate",
        "philly",
        "--policy",
        "gpupool",
        "--limit",
        "40",
        "--queue-weights",
        "equal",
        "--json",
        stdout=out,
    )
    document = json.loads(out.getvalue())
    assert document["trace"] == "philly"
    assert document["queue_weights"] == "equal"
    entry = document["policies"]["gpupool"]
    for key in (
        "jct_mean_s",
        "jct_p99_s",
        "wait_mean_s",
        "wait_p99_s",
        "utilisation",
        "preemptions",
        "gpu_hours_lost",
        "gpu_hours_lost_fraction",
        "tenants",
    ):
        assert key in entry
    assert entry["jct_mean_s"] >= entry["wait_mean_s"] >= 0
    assert entry["finish_time_fairness_max"] > 0
    tenant = next(iter(entry["tenants"].values()))
    assert tenant["alone_wait_mean_s"] is not None
    assert tenant["finish_time_fairness"] > 0


@pytest.mark.usefixtures("sample_data")
def test_simulate_philly_writes_a_self_contained_report(tmp_path: Path) -> None:
    """``--report`` writes one HTML page with plotly.js inlined and the wait box plots."""
    path = tmp_path / "b3.html"
    out, err = StringIO(), StringIO()
    call_command(
        "gpupool",
        "simulate",
        "philly",
        "--limit",
        "30",
        "--report",
        str(path),
        stdout=out,
        stderr=err,
    )
    text = path.read_text()
    assert "Queueing delay per tenant" in text and "<script" in text
    assert "kueue-like" in out.getvalue()


@pytest.mark.slow
def test_the_full_window_meets_the_sharing_incentive(full_philly_jobs: list[PhillyJob]) -> None:
    """B3, full 30 days (a minute or two): gpupool loses <= 1% and no tenant is worse off,
    neither in mean wait nor in mean JCT."""
    run = run_philly(["gpupool"], jobs=full_philly_jobs)
    metrics = run.metrics["gpupool"]
    assert metrics.jobs == 4889
    assert metrics.gpu_hours_lost_fraction <= 0.01
    assert metrics.tenants_worse_than_alone == []
    assert metrics.finish_time_fairness_max is not None
    assert metrics.finish_time_fairness_max <= 1.0 + 1e-9  # nobody finishes later than alone
    assert run.outcomes["gpupool"].capped_instants == 0


def test_without_the_alone_baseline_the_sharing_check_says_not_run(
    sample_philly_jobs: list[PhillyJob],
) -> None:
    """``--no-alone`` checks no tenant, so the verdict is "not run", never "none"."""
    run = run_philly(["gpupool"], jobs=sample_philly_jobs[:30], alone=False)
    assert run.metrics["gpupool"].tenants_worse_than_alone is None
    out = StringIO()
    call_command(
        "gpupool",
        "simulate",
        "philly",
        "--limit",
        "30",
        "--no-alone",
        stdout=out,
        stderr=StringIO(),
    )
    assert "not run" in out.getvalue()
    assert describe_worse_than_alone([]) == "none"
    assert describe_worse_than_alone(["a", "b"]) == "a, b"
