"""The demo's workload generator as data: seeded, trace-shaped, scaled to the pool's load."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from gpupool.simulation import make_workload_mix
from gpupool.simulation.datasets import MissingTraceData
from gpupool.simulation.workload_generator import (
    MAX_RUNTIME_S,
    DemoChoices,
    WorkloadGenerator,
    WorkloadMix,
    offered_gpu_seconds_per_job,
    rate_scale,
)

TEAMS = ["ads", "nlp", "recsys", "search", "speech", "vision"]
START = 1_795_946_400.0


@pytest.fixture(scope="module")
def mix() -> WorkloadMix:
    return WorkloadMix.load()


def generator(mix: WorkloadMix, seed: int = 42, scale: float = 20.0) -> WorkloadGenerator:
    return WorkloadGenerator(mix, TEAMS, seed=seed, start=START, scale=scale)


def test_the_same_seed_gives_the_same_submissions(mix: WorkloadMix) -> None:
    first = generator(mix).until(START + 6 * 3600)
    again = generator(mix).until(START + 6 * 3600)
    other = generator(mix, seed=43).until(START + 6 * 3600)
    assert first == again and len(first) > 100
    assert first != other


def test_asking_in_steps_gives_what_asking_once_gives(mix: WorkloadMix) -> None:
    stepped = generator(mix)
    in_steps = [s for minute in range(1, 361) for s in stepped.until(START + 60 * minute)]
    assert in_steps == generator(mix).until(START + 6 * 3600)
    assert [s.at for s in in_steps] == sorted(s.at for s in in_steps)


def test_each_team_numbers_its_own_submissions_and_one_team_does_not_shift_another(
    mix: WorkloadMix,
) -> None:
    everyone = generator(mix).until(START + 3 * 3600)
    for team in TEAMS:
        serials = [s.serial for s in everyone if s.team == team]
        assert serials == list(range(1, len(serials) + 1))
    # The teams follow the VCs in size order; ads follows the largest in both pools.
    alone = WorkloadGenerator(mix, ["ads", "zz"], seed=42, start=START, scale=20.0)
    assert [s for s in alone.until(START + 3 * 3600) if s.team == "ads"] == [
        s for s in everyone if s.team == "ads"
    ]


def test_gang_sizes_follow_philly_and_fit_their_flavors(mix: WorkloadMix) -> None:
    subs = generator(mix, scale=200.0).until(START + 12 * 3600)
    assert len(subs) > 5000
    asked = Counter(s.pods * s.gpus_per_pod if s.gpu_milli is None else 1 for s in subs)
    philly = dict(mix.gang_sizes)
    share_of_one = asked[1] / len(subs)
    assert abs(share_of_one - philly[1]) < 0.03  # Philly: 69 % of jobs ask one GPU
    for s in subs:
        if s.flavor == "gb200":
            assert s.topology == "domain" and s.gpus_per_pod == 4 and s.pods * 4 <= 72
        elif s.flavor == "l40s-shared":
            assert s.gpu_milli is not None and 0 < s.gpu_milli < 1000 and s.pods == 1
        elif s.flavor == "a100-3g.40gb":
            assert (s.pods, s.gpus_per_pod) == (1, 1)
        else:
            assert s.flavor == "h100" and s.gpus_per_pod <= 8
        assert 60 <= s.runtime_s <= MAX_RUNTIME_S
        assert (
            s.expected_runtime_s is None
            or s.runtime_s <= s.expected_runtime_s <= 2 * s.runtime_s + 60
        )


def test_run_times_follow_philly_scaled_to_its_recorded_median(mix: WorkloadMix) -> None:
    subs = generator(mix, scale=200.0).until(START + 12 * 3600)
    runtimes = sorted(s.runtime_s for s in subs)
    median = runtimes[len(runtimes) // 2]
    assert 500 < median < 1500  # Philly's recorded median GPU-job run time is 874 s


def test_the_rate_scale_makes_the_offered_load_what_was_asked(mix: WorkloadMix) -> None:
    pool = 424.0
    scale = rate_scale(mix, TEAMS, pool, load=1.0)
    long_run = WorkloadGenerator(mix, TEAMS, seed=1, start=START, scale=scale)
    days = 20
    subs = long_run.until(START + days * 86400)
    offered = sum(s.gpus * s.runtime_s for s in subs) / (days * 86400)
    assert 0.5 * pool < offered < 2.0 * pool  # bursty VCs: a long run only comes near it
    per_job = offered_gpu_seconds_per_job(mix, DemoChoices())
    assert math.isclose(rate_scale(mix, TEAMS, 2 * pool, load=1.0), 2 * scale)
    assert per_job > 0


def test_the_committed_mix_is_what_the_traces_give() -> None:
    try:
        text = make_workload_mix.render(make_workload_mix.build_mix())
    except MissingTraceData as missing:
        pytest.skip(str(missing))
    assert make_workload_mix.MIX_FILE.read_text() == text
