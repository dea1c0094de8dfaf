"""The reports API without a utilisation source: nothing measured what the GPUs did, so the
active and idle allocated columns of every report are null in JSON and empty in the CSV
("not measured"), never the whole usage counted as idle; the other figures stay. With a source
the same history (no activity recorded) is all idle allocated, as ever. The pages a source
cached are not served once it is gone, and the schema says the columns may be null."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cost_builders import Pool
from csv_exports import downloaded, json_pages
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from gpupool.accounting.reports import ACTIVE_LINES

pytestmark = pytest.mark.django_db

MARCH = "start=2026-03-01&end=2026-03-31"
LINES = (*ACTIVE_LINES, *(f"{line}_cost" for line in ACTIVE_LINES))
ClientAs = Callable[[str], APIClient]
# Each report, and the columns of it only a source measures.
MEASURED_BY_REPORT = {
    f"/api/v1/reports/usage/?{MARCH}": (
        "active_gpu_hours", "idle_gpu_hours", "active_cost", "idle_cost",
    ),
    f"/api/v1/reports/attribution/?{MARCH}&by=tenant": LINES,
    f"/api/v1/reports/capacity/?{MARCH}": LINES,
    f"/api/v1/reports/workloads/?{MARCH}": ("active_gpu_hours", "idle_gpu_hours"),
}  # fmt: skip


@pytest.fixture
def no_source(settings: Any) -> None:
    settings.GPUPOOL_UTILIZATION_SOURCE = "none"


@pytest.mark.usefixtures("no_source")
@pytest.mark.parametrize(("url", "measured"), MEASURED_BY_REPORT.items())
def test_a_report_without_a_source_leaves_active_and_idle_null(
    period: Pool, client_as: ClientAs, url: str, measured: tuple[str, ...]
) -> None:
    rows = json_pages(client_as("finance"), url)

    assert rows
    for row in rows:
        assert {name: row[name] for name in measured} == dict.fromkeys(measured), url
        assert all(value is not None for name, value in row.items() if name not in measured)


@pytest.mark.usefixtures("no_source")
def test_the_teams_used_and_charged_stay_without_a_source(
    period: Pool, client_as: ClientAs
) -> None:
    rows = json_pages(client_as("finance"), f"/api/v1/reports/attribution/?{MARCH}&by=tenant")

    assert {row["tenant"]: row["used"] for row in rows} == {
        "a": "16.0000", "b": "12.0000", "c": "8.0000",
    }  # fmt: skip
    assert all(row["used_idle"] is None and row["charged"] for row in rows)


@pytest.mark.usefixtures("no_source")
@pytest.mark.parametrize(("url", "measured"), MEASURED_BY_REPORT.items())
def test_a_reports_csv_without_a_source_leaves_active_and_idle_empty(
    period: Pool, client_as: ClientAs, url: str, measured: tuple[str, ...]
) -> None:
    rows = downloaded(client_as("finance"), url)

    assert rows
    for row in rows:
        assert [row[name] for name in measured] == [""] * len(measured), url


def test_with_a_source_unmeasured_usage_is_idle_allocated(
    period: Pool, client_as: ClientAs, settings: Any
) -> None:
    """No activity was recorded: with a source, all that each team used is idle allocated."""
    settings.GPUPOOL_UTILIZATION_SOURCE = "simulated"

    rows = json_pages(client_as("finance"), f"/api/v1/reports/attribution/?{MARCH}&by=tenant")

    assert rows and all(row["used_idle"] == row["used"] != "0.0000" for row in rows)


def test_a_page_cached_with_a_source_is_not_served_without_one(
    period: Pool, client_as: ClientAs, settings: Any
) -> None:
    url = f"/api/v1/reports/attribution/?{MARCH}&by=tenant"
    client = client_as("finance")
    settings.GPUPOOL_UTILIZATION_SOURCE = "simulated"
    measured = client.get(url).json()["results"]

    settings.GPUPOOL_UTILIZATION_SOURCE = "none"
    unmeasured = client.get(url).json()["results"]

    assert measured[0]["used_idle"] is not None
    assert unmeasured[0]["used_idle"] is None


def test_the_schema_says_the_measured_columns_may_be_null() -> None:
    schemas = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]

    for name, measured in (
        ("UsageRow", MEASURED_BY_REPORT[f"/api/v1/reports/usage/?{MARCH}"]),
        ("AttributionRow", LINES),
        ("CapacityRow", LINES),
        ("WorkloadCost", ("active_gpu_hours", "idle_gpu_hours")),
    ):
        fields = schemas[name]["properties"]
        assert all(fields[column].get("nullable") for column in measured), name
        assert all("not measured" in fields[column]["description"] for column in measured), name
        assert not fields["used" if "used" in fields else "gpu_hours"].get("nullable"), name
