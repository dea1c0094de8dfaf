"""With DEBUG off (production), an address that names nothing answers the product's 404 page
in the dashboard's frame (the menu for a logged-in user, none for a visitor, and a way back),
a crash the product's static 500 page, and an address under /api/ the API's JSON error."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import text
from django.test import Client, RequestFactory, override_settings
from django.views.defaults import server_error
from two_teams import quota_request


@pytest.fixture(autouse=True)
def production() -> Any:
    """DEBUG off, as in production (with it on, Django answers its own technical pages)."""
    with override_settings(DEBUG=False):
        yield


MENU = '<nav aria-label="Main">'
BACK_TO_OVERVIEW = '<a href="/overview/">Back to Overview</a>'


def main_part(answer: Any) -> str:
    """The page's ``<main>``: what it says, without its frame's per-request token."""
    return text(answer).split("<main", 1)[1].split("</main>", 1)[0]


@pytest.mark.parametrize("address", ["/requests/999/", "/workloads/nlp/nope/", "/no-such-page/"])
def test_a_logged_in_user_gets_the_not_found_page_with_the_menu_and_a_way_back(
    pool: Any, page_as: Any, address: str
) -> None:
    answer = page_as("lena").get(address)
    assert answer.status_code == 404
    assert [t.name for t in answer.templates][:2] == ["404.html", "dashboard/base.html"]
    page = text(answer)
    assert "<h1>Page not found</h1>" in page
    assert f"There is nothing at <code>{address}</code> that you can see" in page
    assert MENU in page and "<span>lena" in page
    assert BACK_TO_OVERVIEW in page


def test_another_teams_request_is_not_found_as_one_that_never_was(pool: Any, page_as: Any) -> None:
    theirs = quota_request(pool, by="vera", team="vision")
    client = page_as("lena")
    hidden = main_part(client.get(f"/requests/{theirs.pk}/"))
    missing = main_part(client.get("/requests/999999/"))
    assert "Page not found" in hidden
    assert hidden.replace(f"/requests/{theirs.pk}/", "/requests/N/") == missing.replace(
        "/requests/999999/", "/requests/N/"
    )


def test_a_visitor_gets_the_not_found_page_without_the_menu(pool: Any) -> None:
    answer = Client().get("/no-such-page/")
    assert answer.status_code == 404
    page = text(answer)
    assert "<h1>Page not found</h1>" in page
    assert MENU not in page and "Log out" not in page
    assert '<a href="/login/">Log in</a>' in page


@pytest.mark.parametrize("address", ["/api/v1/workloads/nlp/nope/", "/api/v1/nope/", "/api/nope/"])
def test_an_address_under_the_api_still_answers_the_apis_json_404(
    pool: Any, page_as: Any, address: str
) -> None:
    answer = page_as("lena").get(address)
    assert answer.status_code == 404
    assert answer["Content-Type"].startswith("application/json")
    assert answer.json()["error"]["status"] == 404


def test_the_server_error_page_renders_without_the_database_or_a_request_context() -> None:
    # (no ``db`` fixture: any query here fails the test)
    answer = server_error(RequestFactory().get("/overview/"))
    assert answer.status_code == 500
    page = answer.content.decode()
    assert "Something went wrong on our side" in page
    assert '<link rel="stylesheet" href="/static/dashboard/css/dashboard.css">' in page
    assert "--nav:" in page  # the palette, as every page has it
    assert BACK_TO_OVERVIEW in page
    assert MENU not in page
