"""Walk-through s16: ``GET /logout/`` asks before logging out (a "Log out" button that POSTs
with the CSRF token; once logged out, a link to log in) instead of Django's blank 405; the
nav's Log out stays a POST form. Staff users (who may open the admin site, where priority
classes, budgets and flavors are configured) find it in the navigation; nobody else does.

The pool (``conftest``): ``ada`` is an admin without the staff flag, ``lena`` a lead.
"""

from __future__ import annotations

from typing import Any

from dashboard_pages import text
from django.test import Client

ADMIN_LINK = '<a href="/admin/">Configuration (admin site)</a>'


def test_get_logout_asks_with_a_post_button_and_keeps_the_user_logged_in(
    pool: Any, page_as: Any
) -> None:
    client = page_as("lena")
    response = client.get("/logout/")
    assert response.status_code == 200
    page = text(response)
    main = page.split('<main id="main"', 1)[1]
    form = main.split('<form method="post" action="/logout/">', 1)[1].split("</form>", 1)[0]
    assert 'name="csrfmiddlewaretoken"' in form
    assert '<button type="submit">Log out</button>' in form
    assert client.get("/workloads/").status_code == 200  # still logged in


def test_the_button_logs_out_with_the_csrf_token(pool: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(pool.users["lena"])
    asked = client.get("/logout/")
    token = asked.context["csrf_token"]
    response = client.post("/logout/", {"csrfmiddlewaretoken": str(token)})
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert client.get("/workloads/").status_code == 302  # to the login page


def test_get_logout_once_logged_out_links_to_the_login_page(db: Any) -> None:
    response = Client().get("/logout/")
    assert response.status_code == 200
    page = text(response)
    assert "You are logged out" in page and '<a href="/login/">Log in to gpupool</a>' in page
    assert '<button type="submit">Log out</button>' not in page


def test_the_navs_log_out_stays_a_post_form(pool: Any, page_as: Any) -> None:
    page = text(page_as("lena").get("/workloads/"))
    who = page.split('<div class="who">', 1)[1].split("</div>", 1)[0]
    assert '<form method="post" action="/logout/">' in who and "csrfmiddlewaretoken" in who


def test_staff_users_find_the_admin_site_beside_their_name(pool: Any, page_as: Any) -> None:
    """Beside the user's name and Log out, not in the Main navigation: its links are the
    pages of the dashboard, each marked current on its own page."""
    ada = pool.users["ada"]
    assert ADMIN_LINK not in text(page_as("ada").get("/overview/"))  # an admin, but no staff
    assert ADMIN_LINK not in text(page_as("lena").get("/workloads/"))
    ada.is_staff = True
    ada.save(update_fields=["is_staff"])
    page = text(page_as("ada").get("/overview/"))
    nav = page.split('<nav aria-label="Main">', 1)[1].split("</nav>", 1)[0]
    who = page.split('<div class="who">', 1)[1].split("</div>", 1)[0]
    assert ADMIN_LINK in who and ADMIN_LINK not in nav
