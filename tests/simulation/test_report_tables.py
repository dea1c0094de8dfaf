"""The report tables: the rows the command line, the HTML reports and the benchmark scripts
share, built from a run's JSON document, and their HTML and markdown forms."""

from __future__ import annotations

from typing import Any

from gpupool.simulation.report import (
    Table,
    html_table,
    markdown_table,
    placement_table,
    queueing_policy_table,
    queueing_tenant_table,
    rich_table,
)

HOUR = 3600.0


def policy_entry(wait_h: float, worse: list[str] | None, tenants: dict[str, Any]) -> dict[str, Any]:
    """The B3 JSON entry of one policy, with the keys the tables read."""
    return {
        "jct_mean_s": 10 * HOUR,
        "jct_p99_s": 100 * HOUR,
        "wait_mean_s": wait_h * HOUR,
        "wait_p99_s": 4 * wait_h * HOUR,
        "utilisation": 0.5443,
        "preemptions": 138,
        "gpu_hours_lost": 119.17,
        "gpu_hours_lost_fraction": 0.000217,
        "share_deviation": 0.0193,
        "tenants_worse_than_alone": worse,
        "finish_time_fairness_max": None if worse is None else 1.0,
        "tenants": tenants,
    }


def tenant_entry(wait_h: float, alone_h: float | None) -> dict[str, Any]:
    """The B3 JSON entry of one tenant under one policy."""
    return {
        "deserved_gpus": 8,
        "jobs": 3,
        "gpu_hours": 1234.5,
        "alone_wait_mean_s": None if alone_h is None else alone_h * HOUR,
        "wait_mean_s": wait_h * HOUR,
        "wait_p99_s": 2 * wait_h * HOUR,
    }


B3 = {
    "trace": "philly",
    "jobs": 4889,
    "gpu_hours": 548178.04,
    "capacity_gpus": 1024,
    "days": 30.0,
    "policies": {
        "fifo": policy_entry(31.5, ["b"], {"b": tenant_entry(3, 1), "a": tenant_entry(1, 2)}),
        "gpupool": policy_entry(0.5, None, {"b": tenant_entry(0.25, 1), "a": tenant_entry(0, 2)}),
    },
}


def test_the_b3_policy_table_has_one_row_per_policy_in_hours_and_percent() -> None:
    table = queueing_policy_table(B3)
    assert table.title == "philly: 4889 jobs, 548,178 GPU-hours, 1024 GPUs, 30 days"
    assert table.header[:5] == ("policy", "JCT mean", "JCT p99", "wait mean", "wait p99")
    fifo, gpupool = table.rows
    assert fifo == (
        "fifo",
        "10.00 h",
        "100.0 h",
        "31.50 h",
        "126.00 h",
        "54.4%",
        "138",
        "119.2 (0.022%)",
        "1.93%",
        "b",
        "1.00",
    )
    assert gpupool[-2:] == ("not run", "-")  # no alone baseline: nothing was checked


def test_the_b3_tenant_table_sorts_tenants_and_shows_alone_then_each_policy() -> None:
    table = queueing_tenant_table(B3)
    assert table.header == (
        "tenant",
        "deserved GPUs",
        "jobs",
        "GPU-h",
        "alone",
        "fifo",
        "gpupool",
        "p99 fifo",
        "p99 gpupool",
    )
    assert table.rows == (
        ("a", "8", "3", "1,234", "2.00", "1.00", "0.00", "2.0", "0.0"),
        ("b", "8", "3", "1,234", "1.00", "3.00", "0.25", "6.0", "0.5"),
    )


def test_the_b2_table_shows_the_paper_beside_ours_and_blanks_what_is_missing() -> None:
    document = {
        "trace": "default",
        "seed": 42,
        "policies": {
            "fgd": {
                "allocation_ratio": {"1.0": 0.9543, "1.3": 0.9559},
                "fragmentation_rate": {"1.0": 0.9961},
            },
            "gpupool": {
                "allocation_ratio": {"1.0": None, "1.3": None},
                "fragmentation_rate": {"1.0": None},
            },
        },
        "paper": {"fgd": {"allocation_ratio": {"1.0": 0.95, "1.3": 0.95391}}},
    }
    table = placement_table(document)
    assert table.title == "openb default (seed 42)"
    assert table.rows == (
        ("fgd", "95.43%", "95.59%", "99.61%", "95.39%"),
        ("gpupool", "", "", "", ""),
    )


def test_a_table_renders_as_escaped_html_as_markdown_and_for_the_terminal() -> None:
    table = Table(title="a <b>", header=("name", "value"), rows=(("x&y", "1"),))
    assert html_table(table).splitlines() == [
        "<table border='1' cellpadding='4'>",
        "<caption>a &lt;b&gt;</caption>",
        "<tr><th>name</th><th>value</th></tr>",
        "<tr><td>x&amp;y</td><td>1</td></tr>",
        "</table>",
    ]
    assert markdown_table(table) == "| name | value |\n|---|---|\n| x&y | 1 |"
    terminal = rich_table(table)
    assert [c.justify for c in terminal.columns] == ["left", "right"]
    assert terminal.row_count == 1
