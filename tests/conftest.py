"""Shared pytest configuration. Each test folder adds its own fixtures in its conftest.py."""

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from domain_builders import user


@pytest.fixture
def admin_client(client: Client) -> Client:
    """A client logged in as ``root-admin``: a superuser who also holds the site admin role
    (it replaces pytest-django's fixture of the same name)."""
    superuser = user("root-admin", admin=True)
    superuser.is_staff = superuser.is_superuser = True
    superuser.save()
    client.force_login(superuser)
    return client


def page_form_data(page: Any) -> dict[str, Any]:
    """What an admin add/change page posts when nothing is touched: its form, each inline's
    management form and rows (a ticked box is "on"; an empty value is "")."""
    context = page.context
    forms = [context["adminform"].form]
    data: dict[str, Any] = {}
    for inline in context["inline_admin_formsets"]:
        management = inline.formset.management_form
        data |= {
            management.add_prefix(name): management[name].value() for name in management.fields
        }
        forms.extend(inline.formset.forms)
    for form in forms:
        for name in form.fields:
            value = form[name].value()
            if value is True:
                value = "on"
            if value is not False:
                data[form.add_prefix(name)] = "" if value is None else value
    return data


@pytest.fixture
def submit_admin_form(admin_client: Client) -> Callable[..., Any]:
    """Open an admin add/change page and post it as it stands with ``changes`` on top (True
    ticks a box, False unticks it); returns the response."""

    def submit(url: str, changes: dict[str, Any] | None = None, *, follow: bool = False) -> Any:
        page = admin_client.get(url)
        assert page.status_code == 200, url
        data = page_form_data(page)
        for name, value in (changes or {}).items():
            if value is False:
                data.pop(name, None)
            else:
                data[name] = "on" if value is True else value
        return admin_client.post(url, data, follow=follow)

    return submit
