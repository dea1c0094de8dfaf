"""The Requests page offers the "New request" panel only to those who may file: a lead (and
an admin) sees the form; finance, who reads every team's requests and files none, sees no
panel telling them they lead no team."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def requests_page(pool: Any, name: str) -> str:
    page = Client()
    page.force_login(pool.users[name])
    response = page.get("/requests/")
    assert response.status_code == 200
    return response.content.decode()


def test_finance_sees_no_new_request_panel(pool: Any) -> None:
    text = requests_page(pool, "fin")
    assert "New request" not in text
    assert "You lead no team" not in text
    assert "a team's lead files them and an admin decides" in text


@pytest.mark.parametrize("name", ["lena", "ada"], ids=["lead", "admin"])
def test_those_who_file_see_the_form(pool: Any, name: str) -> None:
    text = requests_page(pool, name)
    assert "New request" in text and "data-request-form" in text
    assert "Ask for more quota for a team's queue" in text
