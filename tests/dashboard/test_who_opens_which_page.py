"""Every page for every role: who may open it (200), who is refused (403), where anonymous
visitors go (the login page), and what the navigation offers. The table below is the rule;
a new page without a row fails."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import BY_ROLE, text
from django.test import Client
from django.urls import get_resolver, reverse

from gpupool.dashboard.navigation import PAGES

OK, NO = 200, 403
# page -> expected status for admin, finance, lead, member.
MATRIX: dict[str, tuple[int, int, int, int]] = {
    "overview": (OK, OK, OK, OK),
    "workloads": (OK, NO, OK, OK),
    "queues": (OK, OK, OK, OK),
    "cost": (OK, OK, OK, OK),
    "utilization": (OK, OK, OK, OK),
    "preemptions": (OK, NO, OK, OK),
    "fragmentation": (OK, NO, OK, OK),
    "cluster": (OK, NO, OK, OK),
    "requests": (OK, OK, OK, NO),
    "approvals": (OK, NO, NO, NO),
    "audit": (OK, NO, NO, NO),
}
ROLES = ("admin", "finance", "lead", "member")
# Routes that are not pages of their own: where each is tested.
NOT_PAGES = {
    "home": "test_login_and_home.py",
    "login": "test_login_and_home.py",
    "logout": "test_login_and_home.py",
    "cluster-cordon": "test_cluster_page.py",
    "cluster-gpu-health": "test_cluster_page.py",
    "cluster-drain": "test_cluster_page.py",
    "request": "test_requests_and_approvals.py",
    "request-edit": "test_request_governance_pages.py",
    "workload": "test_workload_page.py",
    "workload-dry-run": "test_submit_and_dry_run.py",
    "workload-submit": "test_submit_and_dry_run.py",
    "workload-cancel": "test_cancel_from_the_page.py",
    "approval": "test_requests_and_approvals.py",
    "approval-what-if": "test_requests_and_approvals.py",
}


def dashboard_route_names() -> set[str]:
    """Every route name of the dashboard's URL conf."""
    resolver = get_resolver("gpupool.dashboard.urls")
    return {name for name in resolver.reverse_dict if isinstance(name, str)}


def test_every_route_of_the_dashboard_has_a_row_or_a_test_of_its_own() -> None:
    assert dashboard_route_names() == set(MATRIX) | set(NOT_PAGES)
    assert {page.key for page in PAGES} == set(MATRIX)


@pytest.mark.parametrize("key", sorted(MATRIX))
@pytest.mark.parametrize("role", ROLES)
def test_each_role_opens_the_pages_the_matrix_allows_and_no_other(
    page_as: Any, key: str, role: str
) -> None:
    expected = MATRIX[key][ROLES.index(role)]
    response = page_as(BY_ROLE[role]).get(reverse(f"dashboard:{key}"))
    assert response.status_code == expected, f"{role} on {key}"
    if expected == NO:
        assert "is not for your role" in text(response)


@pytest.mark.parametrize("key", sorted(MATRIX))
def test_an_anonymous_visitor_of_any_page_is_sent_to_log_in(pool: Any, key: str) -> None:
    url = reverse(f"dashboard:{key}")
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={url}"


@pytest.mark.parametrize("key", sorted(MATRIX))
def test_a_user_without_a_role_opens_no_page(page_as: Any, key: str) -> None:
    assert page_as("nobody").get(reverse(f"dashboard:{key}")).status_code == NO


@pytest.mark.parametrize("role", ROLES)
def test_the_navigation_offers_the_pages_the_role_opens(page_as: Any, role: str) -> None:
    page = text(page_as(BY_ROLE[role]).get("/overview/"))
    navigation = page.split('<nav aria-label="Main">', 1)[1].split("</nav>", 1)[0]
    offered = {key for key in MATRIX if f'href="{reverse(f"dashboard:{key}")}"' in navigation}
    opens = {key for key, row in MATRIX.items() if row[ROLES.index(role)] == OK}
    if role == "admin":
        opens -= {"requests"}  # admins decide requests on Approvals; Requests stays open
    assert offered == opens
    assert 'aria-current="page"' in navigation


def test_pages_have_a_skip_link_landmarks_and_a_title(page_as: Any) -> None:
    page = text(page_as("ada").get("/cluster/"))
    assert '<a class="skip-link" href="#main">Skip to content</a>' in page
    assert '<main id="main"' in page and '<nav aria-label="Main">' in page
    assert "<title>Cluster · gpupool</title>" in page
    assert '<html lang="en">' in page


def test_a_live_part_polled_after_the_session_ended_sends_the_whole_page_to_log_in(
    pool: Any,
) -> None:
    response = Client().get(
        "/overview/",
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="live",
        HTTP_HX_CURRENT_URL="http://testserver/overview/",
    )
    assert response["HX-Redirect"] == "/login/?next=%2Foverview%2F"
    assert b"Log in" not in response.content
