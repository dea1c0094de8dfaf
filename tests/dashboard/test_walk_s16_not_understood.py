"""A filter value a page does not know -- ``?flavor=bogus`` on Queues, Fragmentation and
Cluster, ``?show=bogus`` on Cluster -- is said beside its filter with what the page shows
instead (``views.choice_not_understood``, the one helper), never silently ignored."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import text
from domain_builders import flavor

FLAVOR_NOTE = 'id="flavor-not-understood"'

# Each page's filter of flavors: its URL, and the id of the note beside the filter.
FLAVOR_PAGES = {
    "queues": ("/queues/", "flavor-not-understood"),
    "fragmentation": ("/fragmentation/", "flavor-not-understood"),
    "cluster": ("/cluster/", "flavor-filter-not-understood"),
}


@pytest.mark.parametrize("page", sorted(FLAVOR_PAGES))
def test_an_unknown_flavor_is_said_beside_the_filter_with_what_is_shown(
    pool: Any, page_as: Any, page: str
) -> None:
    url, note = FLAVOR_PAGES[page]
    response = page_as("ada").get(f"{url}?flavor=bogus")
    assert response.status_code == 200
    shown = text(response)
    assert f'id="{note}"' in shown and 'role="alert"' in shown
    assert "“bogus” was not understood: a flavor is one of h100." in shown


@pytest.mark.parametrize("page", ["queues", "fragmentation"])
def test_a_page_of_one_flavor_names_the_flavor_it_shows_instead(
    pool: Any, page_as: Any, page: str
) -> None:
    flavor("a100")  # a second flavor, without GPUs: the pages show the one with most GPUs
    url, _ = FLAVOR_PAGES[page]
    shown = text(page_as("vic").get(f"{url}?flavor=bogus"))
    known = "a100, h100" if page == "queues" else "h100"  # fragmentation: flavors with GPUs
    assert (
        f"“bogus” was not understood: a flavor is one of {known}. "
        "Showing h100, the flavor with the most GPUs instead."
    ) in shown


def test_the_cluster_page_shows_every_node_for_an_unknown_flavor(pool: Any, page_as: Any) -> None:
    shown = text(page_as("ada").get("/cluster/?flavor=bogus"))
    assert "Showing every flavor instead." in shown
    assert '<th scope="row">n1' in shown and '<th scope="row">n2' in shown
    assert 'aria-describedby="flavor-filter-not-understood"' in shown
    assert "No node matches" not in shown


def test_the_cluster_page_says_a_show_it_does_not_know(pool: Any, page_as: Any) -> None:
    shown = text(page_as("ada").get("/cluster/?show=bogus"))
    assert 'id="show-filter-not-understood"' in shown
    assert (
        "“bogus” was not understood: a choice of nodes (show) is one of problems. "
        "Showing every node instead."
    ) in shown
    assert '<th scope="row">n1' in shown and '<th scope="row">n2' in shown


@pytest.mark.parametrize(
    "url",
    ["/queues/?flavor=h100", "/fragmentation/?flavor=h100", "/cluster/?flavor=h100&show=problems"],
)
def test_known_values_and_none_say_nothing(pool: Any, page_as: Any, url: str) -> None:
    for asked in (url, url.split("?")[0]):
        assert "not-understood" not in text(page_as("ada").get(asked))


def test_a_value_is_written_as_text_not_markup(pool: Any, page_as: Any) -> None:
    shown = text(page_as("ada").get("/queues/?flavor=<b>x</b>"))
    assert "“&lt;b&gt;x&lt;/b&gt;” was not understood" in shown and "<b>x</b>" not in shown


def test_a_known_flavor_of_no_node_still_matches_no_node(pool: Any, page_as: Any) -> None:
    flavor("a100")
    shown = text(page_as("ada").get("/cluster/?flavor=a100"))
    assert "No node matches" in shown and "not-understood" not in shown
