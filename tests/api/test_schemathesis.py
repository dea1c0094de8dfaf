"""The API against its own OpenAPI schema (schemathesis): for generated requests to every
operation, logged in with a token, no answer is a server error and no documented answer breaks
the schema. A bounded number of examples per operation keeps it under a minute or so."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from resources_pool import pool
from schemathesis.checks import not_a_server_error, response_schema_conformance

from gpupool.api.actions import do_issue_token
from gpupool.wsgi import application

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

EXAMPLES_PER_OPERATION = 12


def published_schema() -> Any:
    """The schema ``/api/v1/schema/`` serves, its requests answered in-process by the app."""
    loaded = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
    loaded.app = application
    return loaded


@pytest.fixture(autouse=True)
def one_connection_for_the_test() -> Iterator[None]:
    """Requests go through the WSGI app itself, whose request signals would close the test's
    database connection (inside its transaction) after each one; Django's own test client
    detaches the same handler."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def token(world: Any) -> str:
    """An admin's token (every operation is open to admins, so each is reached), on a pool
    with an object of each kind."""
    pool(world)
    return str(do_issue_token(world.users["admin"]).key)


schema = published_schema()


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_generated_request_gets_a_server_error_or_an_answer_off_the_schema(
    case: Any, token: str
) -> None:
    response = case.call(headers={"Authorization": f"Bearer {token}"})
    case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
