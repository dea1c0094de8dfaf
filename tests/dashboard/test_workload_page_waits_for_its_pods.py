"""The workload page of a gang that waits for pods the cluster has not made says so in its
start line, as the CLI does, rather than "estimated start unknown" or a time; a gang of
gpupool's own, whose pods the loop is creating, reads as any other."""

from __future__ import annotations

from typing import Any

from dashboard_pages import live, text
from domain_builders import explained
from two_teams import submit


def card(page: str) -> str:
    """The workload card's line on its start."""
    return page.split("data-start-estimate>", 1)[1].split("</p>", 1)[0]


def test_a_gang_missing_a_pod_waits_for_its_pods(pool: Any, page_as: Any) -> None:
    workload = submit(pool, "train", pool.nlp_queue, "max")
    explained(workload, "gang", "1 of its pods does not exist yet.", {"missing_pods": 1})
    line = card(text(live(page_as("max"), "/workloads/nlp/train/")))
    assert line == "no estimated start: it waits for its pods (1 not created yet)"


def test_pods_gpupool_is_creating_are_not_waited_for(pool: Any, page_as: Any) -> None:
    workload = submit(pool, "train", pool.nlp_queue, "max")
    explained(
        workload,
        "gang",
        "Its pods are being created.",
        {"missing_pods": 1, "pods_being_created": True},
    )
    line = card(text(live(page_as("max"), "/workloads/nlp/train/")))
    assert "waits for its pods" not in line
