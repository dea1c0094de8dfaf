"""The API's short addresses lead to its current version: ``/api/`` and ``/api/docs/`` to the
docs page, ``/api/schema/`` to the schema (temporary redirects: they follow the version). And
every page links to the API docs, from its footer."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("address", "lands_on"),
    [("/api/", "api:docs"), ("/api/docs/", "api:docs"), ("/api/schema/", "api:schema")],
)
def test_the_short_addresses_redirect_to_the_current_version(
    api_as: Any, address: str, lands_on: str
) -> None:
    answer = api_as("anonymous").get(address)
    assert answer.status_code == 302
    assert answer["Location"] == reverse(lands_on) and reverse(lands_on).startswith("/api/v1/")
    assert api_as("anonymous").get(answer["Location"]).status_code == 200


def test_the_schema_redirect_keeps_the_format_asked(api_as: Any) -> None:
    answer = api_as("anonymous").get("/api/schema/?format=json")
    assert answer["Location"] == "/api/v1/schema/?format=json"


LINK = '<a href="/api/v1/docs/">API documentation</a>'


def test_the_pages_link_to_the_api_docs_in_their_footer(world: Any) -> None:
    visitor = Client()
    login = visitor.get("/login/").content.decode()
    assert LINK in login.split("<footer>", 1)[1]
    member = Client()
    member.force_login(world.users["member"])
    page = member.get("/overview/").content.decode()
    assert LINK in page.split("<footer>", 1)[1]
