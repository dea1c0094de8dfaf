"""Synthetic traces: seeded, on their load, Zipf tenants, bursts; bad specs; the CLI."""

from __future__ import annotations

import json
from collections import defaultdict
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from gpupool.simulation.queueing.philly import DAY_S, PhillyJob, run_philly
from gpupool.simulation.queueing.synthetic_trace import SyntheticSpec, synthetic_jobs
from gpupool.simulation.report import alone_figure, wait_figure

HOUR = 3600.0
POPULATION = [
    PhillyJob("x", 0, 0.0, 1, HOUR),
    PhillyJob("x", 1, 0.0, 4, 2 * HOUR),
    PhillyJob("x", 2, 0.0, 8, 10 * HOUR),
]
CAPACITY = 64


def in_window_gpu_hours(jobs: list[PhillyJob], window_s: float) -> dict[str, float]:
    """Per tenant, the GPU-hours its jobs would run inside the window, started on arrival."""
    result: dict[str, float] = defaultdict(float)
    for job in jobs:
        result[job.vc] += job.gpus * min(job.duration_s, window_s - job.arrival_s) / HOUR
    return dict(result)


def test_a_trace_is_seeded_sorted_and_on_its_load() -> None:
    """Same seed, same trace; each tenant's in-window GPU-hours reach its Zipf part of
    load x capacity x window and pass it by less than one job (at most 80 GPU-hours)."""
    spec = SyntheticSpec(tenants=3, days=1, load=0.5, skew=1.0, seed=7)
    jobs = synthetic_jobs(spec, POPULATION, CAPACITY)
    assert jobs == synthetic_jobs(spec, POPULATION, CAPACITY)
    assert jobs != synthetic_jobs(
        SyntheticSpec(tenants=3, days=1, load=0.5, seed=8), POPULATION, CAPACITY
    )
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)
    assert all(0 <= j.arrival_s < DAY_S for j in jobs)
    assert {(j.gpus, j.duration_s) for j in jobs} <= {(p.gpus, p.duration_s) for p in POPULATION}
    total = 0.5 * CAPACITY * 24  # GPU-hours
    weights = {"t01": 1, "t02": 1 / 2, "t03": 1 / 3}
    asked = in_window_gpu_hours(jobs, DAY_S)
    assert set(asked) == set(weights)
    for tenant, weight in weights.items():
        target = total * weight / sum(weights.values())
        assert target <= asked[tenant] < target + 80


def test_skew_zero_gives_equal_tenants() -> None:
    """With skew 0 every tenant asks the same part (to within one job)."""
    spec = SyntheticSpec(tenants=4, days=2, load=0.6, skew=0.0, seed=3)
    asked = in_window_gpu_hours(synthetic_jobs(spec, POPULATION, CAPACITY), 2 * DAY_S)
    target = 0.6 * CAPACITY * 48 / 4
    assert all(target <= value < target + 80 for value in asked.values())


def test_bursts_gather_arrivals() -> None:
    """All jobs in one burst per tenant: nearly all arrive within 5 h of the tenant's first
    (offsets are exponential with a 1 h mean); with no bursts they spread over the window."""
    bursty = synthetic_jobs(
        SyntheticSpec(tenants=2, days=7, load=0.3, bursts=1, burst_share=1.0, seed=5),
        POPULATION,
        CAPACITY,
    )
    spread = synthetic_jobs(
        SyntheticSpec(tenants=2, days=7, load=0.3, bursts=0, burst_share=0.0, seed=5),
        POPULATION,
        CAPACITY,
    )
    for jobs, near_share in ((bursty, (0.95, 1.0)), (spread, (0.0, 0.2))):
        by_tenant: dict[str, list[float]] = defaultdict(list)
        for job in jobs:
            by_tenant[job.vc].append(job.arrival_s)
        for arrivals in by_tenant.values():
            first = min(arrivals)
            near = sum(a - first <= 5 * HOUR for a in arrivals) / len(arrivals)
            assert near_share[0] <= near <= near_share[1]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"tenants": 0}, "tenants: must be at least 1"),
        ({"days": 0}, "days: must be a positive number"),
        ({"load": -1}, "load: must be a positive number"),
        ({"skew": -0.5}, "skew: must be 0 or more"),
        ({"burst_share": 1.5}, "burst_share: must lie in 0..1"),
        ({"bursts": 0, "burst_share": 0.5}, "burst_share: must be 0 when bursts is 0"),
    ],
)
def test_bad_specs_are_refused_naming_the_field(spec: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SyntheticSpec(**spec)  # type: ignore[arg-type]


def test_an_empty_population_is_refused() -> None:
    with pytest.raises(ValueError, match="population"):
        synthetic_jobs(SyntheticSpec(), [PhillyJob("x", 0, 0.0, 0, HOUR)], CAPACITY)


@pytest.mark.usefixtures("sample_data")
def test_simulate_synthetic_says_how_the_trace_was_drawn_beside_b3s_figures() -> None:
    """A day of three tenants drawn from the Philly jobs, replayed with gpupool: the JSON
    says how the trace was drawn and has B3's figures for it."""
    out = StringIO()
    call_command(
        "gpupool",
        "simulate",
        "synthetic",
        "--tenants",
        "3",
        "--days",
        "1",
        "--load",
        "0.3",
        "--seed",
        "11",
        "--policy",
        "gpupool",
        "--no-alone",
        "--json",
        stdout=out,
    )
    document = json.loads(out.getvalue())
    assert document["trace"] == "synthetic"
    assert document["synthetic"] == SyntheticSpec(tenants=3, days=1, load=0.3, seed=11).to_json()
    assert set(document["deserved_gpus"]) == {"t01", "t02", "t03"}
    assert sum(document["deserved_gpus"].values()) == document["capacity_gpus"] == 1024
    gpupool = document["policies"]["gpupool"]
    assert gpupool["jobs"] == document["jobs"] > 0
    assert 0 < gpupool["utilisation"] <= 1


@pytest.mark.usefixtures("sample_data")
def test_the_synthetic_report_says_how_the_trace_was_drawn(tmp_path: Path) -> None:
    report = tmp_path / "synthetic.html"
    call_command(
        "gpupool",
        "simulate",
        "synthetic",
        "--tenants",
        "2",
        "--days",
        "0.5",
        "--load",
        "0.2",
        "--policy",
        "gpupool",
        "--no-alone",
        "--report",
        str(report),
        stdout=StringIO(),
        stderr=StringIO(),
    )
    page = report.read_text(encoding="utf-8")
    assert "Multi-tenant queueing on a synthetic trace (tenants 2, days 0.5, load 0.2" in page
    assert "Philly" not in page


def test_report_figures_give_a_policy_one_colour() -> None:
    """The box plots and the bars colour each policy alike; "alone" has its own grey."""
    jobs = synthetic_jobs(SyntheticSpec(tenants=2, days=0.25, load=0.05, seed=1), POPULATION, 64)
    run = run_philly(["kueue-like", "gpupool"], jobs=jobs, days=0.25)
    boxes = {t["name"]: t["marker"]["color"] for t in wait_figure(run)["data"]}
    bars = {t["name"]: t["marker"]["color"] for t in alone_figure(run)["data"]}
    assert boxes == {name: bars[name] for name in ("kueue-like", "gpupool")}
    assert len(set(boxes.values())) == 2
    assert bars["alone on deserved share"] not in boxes.values()


@pytest.mark.usefixtures("sample_data")
def test_simulate_synthetic_refuses_a_bad_spec() -> None:
    err = StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("gpupool", "simulate", "synthetic", "--tenants", "0", stderr=err)
    assert exit_info.value.code == 2
    assert "tenants: must be at least 1" in err.getvalue()


@pytest.mark.usefixtures("sample_data")
def test_whatif_replays_a_drawn_trace_with_a_quota_change() -> None:
    """The what-if replays a drawn trace too: its note says how it was drawn, and a quota
    change on one of its queues is applied."""
    out = StringIO()
    call_command(
        "gpupool",
        "simulate",
        "whatif",
        "--trace",
        "synthetic",
        "--days",
        "0.5",
        "--tenants",
        "2",
        "--load",
        "0.3",
        "--set-quota",
        "vc-t02:v100:deserved=600",
        "--json",
        stdout=out,
    )
    document = json.loads(out.getvalue())
    assert document["note"].startswith("synthetic trace (tenants 2, load 0.3, skew 1,")
    assert document["jobs"] > 0
    assert document["tenants"]["t02"]["after"]["deserved_gpus"] == 600
    assert document["tenants"]["t02"]["before"]["deserved_gpus"] < 600
    err = StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "gpupool", "simulate", "whatif", "--trace", "synthetic", "--load", "0", stderr=err
        )
    assert exit_info.value.code == 2
    assert "load: must be a positive number" in err.getvalue()
