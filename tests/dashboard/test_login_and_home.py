"""Logging in and out, and where each role lands."""

from __future__ import annotations

from typing import Any

import pytest
from dashboard_pages import text
from django.test import Client, override_settings

from gpupool.cli.subcommands.seed_demo import demo_password, demo_users, seed


def test_an_anonymous_visitor_of_the_root_lands_on_the_login_page(db: Any) -> None:
    response = Client().get("/", follow=True)
    assert response.redirect_chain[-1][0].startswith("/login/")
    assert "Log in to gpupool" in text(response)


@pytest.mark.parametrize(
    ("name", "home"),
    [("ada", "/overview/"), ("fin", "/cost/"), ("lena", "/workloads/"), ("max", "/workloads/")],
    ids=["admin on overview", "finance on cost", "lead on my workloads", "member too"],
)
def test_each_role_logs_in_with_its_password_and_lands_on_its_home(
    pool: Any, name: str, home: str
) -> None:
    client = Client()
    response = client.post("/login/", {"username": name, "password": name * 2}, follow=True)
    assert response.redirect_chain[-1][0] == home
    assert response.status_code == 200
    assert f"{name}" in text(response)


def test_users_log_in_without_the_staff_flag_the_admin_site_needs(pool: Any) -> None:
    assert not pool.users["lena"].is_staff
    client = Client()
    response = client.post("/login/", {"username": "lena", "password": "lenalena"})
    assert response.status_code == 302
    admin_site = client.get("/admin/")
    assert admin_site.status_code == 302 and "/admin/login/" in admin_site["Location"]


def test_a_wrong_password_is_refused_on_the_login_page(pool: Any) -> None:
    response = Client().post("/login/", {"username": "lena", "password": "nope"})
    assert response.status_code == 200
    assert "correct username and password" in text(response)


def test_logging_out_ends_the_session_and_returns_to_the_login_page(page_as: Any) -> None:
    client = page_as("max")
    response = client.post("/logout/", follow=True)
    assert response.redirect_chain[-1][0] == "/login/"
    assert client.get("/workloads/").status_code == 302


def test_a_user_without_any_role_is_told_how_to_get_one(page_as: Any) -> None:
    response = page_as("nobody").get("/")
    assert response.status_code == 200
    assert "You have no role in gpupool yet" in text(response)


def test_a_logged_in_user_opening_the_login_page_goes_home(page_as: Any) -> None:
    response = page_as("fin").get("/login/")
    assert response.status_code == 302 and response["Location"] == "/"


@override_settings(DEBUG=True)
def test_in_debug_the_login_page_names_the_demo_users_that_exist_with_their_passwords(
    db: Any,
) -> None:
    seed()
    page = text(Client().get("/login/"))
    for username, _ in demo_users():
        assert f"<code>{username}</code>" in page
        assert f"<code>{demo_password(username)}</code>" in page


@override_settings(DEBUG=False)
def test_without_debug_the_login_page_names_no_demo_user(db: Any) -> None:
    seed()
    page = text(Client().get("/login/"))
    assert "Demo users" not in page
    assert demo_password("admin") not in page


@override_settings(DEBUG=True)
def test_without_the_demo_data_the_login_page_names_nobody(pool: Any) -> None:
    assert "Demo users" not in text(Client().get("/login/"))


def test_every_demo_user_logs_in_to_the_dashboard_with_the_printed_password(db: Any) -> None:
    result = seed()
    assert result["users"] == demo_users()
    for username, _ in demo_users():
        client = Client()
        assert client.login(username=username, password=demo_password(username)), username
        assert client.get("/").status_code == 302, username
