"""The workloads list reads where the estimates stopped looking ahead (``estimate_not_before``)
in the one query of the explanations it already makes for work set aside as never fitting and
gangs that wait for their pods (``workloads.queries.set_aside_and_waiting``), with the one
reader of that fact (``queries.not_before_in``, which ``not_before_of`` and the My workloads
table use): a row says the bound only where its page and ``gpupool why`` would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from domain_builders import explained
from resources_pool import pool, submit

from gpupool.scheduler.explain import NEVER_FITS_FACT
from gpupool.workloads.models import Workload
from gpupool.workloads.queries import estimate_not_before, not_before_in, set_aside_and_waiting

pytestmark = pytest.mark.django_db

URL = "/api/v1/workloads/"
BOUND = datetime(2031, 5, 1, 9, 30, tzinfo=UTC)


def test_the_list_says_not_before_where_the_story_does_in_as_many_queries(
    world: Any, api_as: Any, django_assert_max_num_queries: Any
) -> None:
    made = pool(world)
    lead, nlp = made["own_workload"].submitter, made["nlp"]
    fact = {"estimate_not_before": BOUND.isoformat()}
    bounded = submit("bounded", nlp, lead, gpus=1)
    explained(bounded, "quota", "Waits.", fact, queue_rank=1.0)
    naive = submit("naive", nlp, lead, gpus=1)  # a time naming no zone is UTC
    explained(naive, "quota", "Waits.", {"estimate_not_before": "2031-05-01T09:30:00"}, 2.0)
    estimated = submit("estimated", nlp, lead, gpus=1)  # its estimate wins over the bound
    explained(estimated, "quota", "Waits.", fact, queue_rank=3.0)
    Workload.objects.filter(pk=estimated.pk).update(estimated_start_at=BOUND + timedelta(hours=1))
    never = submit("never", nlp, lead, gpus=1)
    explained(never, "capacity", "Never.", fact | {NEVER_FITS_FACT: True})
    gang = submit("gang", nlp, lead, gpus=1)
    explained(gang, "gang", "1 of its pods does not exist yet.", fact | {"missing_pods": 1}, 4.0)
    # The caller's roles (2), the count, the rows, their positions, their GPUs and one of
    # their explanations' facts: the bounds ride on the last, no query of their own.
    with django_assert_max_num_queries(7):
        rows = api_as("member").get(URL).json()["results"]
    said = {
        row["name"]: None if row["estimate_not_before"] is None
        else datetime.fromisoformat(row["estimate_not_before"])
        for row in rows
    }  # fmt: skip
    names = ["bounded", "naive", "estimated", "never"]
    stories = {w.name: estimate_not_before(w) for w in Workload.objects.filter(name__in=names)}
    assert {name: said[name] for name in names} == stories
    assert stories["bounded"] == stories["naive"] == BOUND
    assert stories["estimated"] is stories["never"] is None
    assert said["gang"] is None  # it waits for its pods: no time to promise, as its card says


def test_set_aside_and_waiting_sorts_the_facts_in_one_query(
    world: Any, django_assert_num_queries: Any
) -> None:
    made = pool(world)
    lead, nlp = made["own_workload"].submitter, made["nlp"]
    fact = {"estimate_not_before": BOUND.isoformat()}
    bounded, never, gang, bare = (submit(name, nlp, lead, gpus=1) for name in "abcd")
    explained(bounded, "quota", "Waits.", fact)
    explained(never, "capacity", "Never.", fact | {NEVER_FITS_FACT: True})
    explained(gang, "gang", "Waits for pods.", fact | {"missing_pods": 2})
    explained(bare, "quota", "Waits.", {"estimate_not_before": "not a time"})
    with django_assert_num_queries(1):
        found = set_aside_and_waiting([bounded.pk, never.pk, gang.pk, bare.pk])
    assert (found.never, found.waiting, found.not_before) == (
        {never.pk},
        {gang.pk},
        {bounded.pk: BOUND},
    )
    with django_assert_num_queries(0):
        assert set_aside_and_waiting([]).not_before == {}
    assert not_before_in({"estimate_not_before": "not a time"}) is None
    assert not_before_in(None) is None
