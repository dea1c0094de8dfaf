"""A read refuses a query parameter its endpoint does not take, naming it and those it takes.

- Every GET route of the URL conf (the permission matrix's routes, so a new one is covered):
  an unknown parameter is a 400 naming it, whose message lists exactly the query parameters
  the OpenAPI schema documents for the operation (and ``format``); and every parameter the
  schema documents is taken (the schema reads each list's filter set, ordering and paginator
  and each view's declared parameters: a filter added to a filter set is covered).
- A typo on a list, a report, a CSV export and utilisation: a 400 naming it and the nearest
  name it takes, never the whole table as if filtered (the answer before).
- The command-line client's list queries (``gpupool status``, ``gpupool nodes`` with every
  option) are all taken.
- HEAD and OPTIONS read as GET; who asks is checked first (401, 403); paging, filtering and
  a report's refusal of a filter it does not apply still work; the schema documents the 400
  on every read.
"""

from __future__ import annotations

import io
import re
from typing import Any
from urllib.parse import urlencode

import pytest
from access_matrix import ROLES, ROWS, _usage_interval
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator
from resources_pool import pool
from test_permission_matrix import api_routes

from gpupool.client.http import Api
from gpupool.client.main import do_nodes, do_status, parser

pytestmark = pytest.mark.django_db

NOT_A_PARAMETER = "zz_not_a_parameter"
UNKNOWN = "unknown query parameter"  # how a refusal starts (gpupool.api.parameters.UNKNOWN)
TAKES = re.compile(r"this endpoint takes (.*)$")
# Public routes that are no resource: the schema (its own ?format=, ?lang=) and its docs page.
NOT_CHECKED = frozenset({"api:schema", "api:docs"})
# The one read the schema does not describe: the API's index.
UNDESCRIBED = frozenset({"/api/v1/"})


@pytest.fixture
def schema(db: Any) -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-any-return]


def _read_cases() -> list[Any]:
    return [
        pytest.param(name, id=name)
        for name, methods in sorted(api_routes().items())
        if "GET" in methods and name not in NOT_CHECKED
    ]


def _address(world: Any, route: str) -> tuple[str, str]:
    """The route's address for an object of the caller's own tenant, and a role that reads it."""
    row = ROWS[route]
    role = next(r for r in ROLES if row.outcome("GET", r, "own") == "ok")
    kwargs = row.target(world)["own"] if row.target is not None else {}
    return reverse(route, kwargs=dict(kwargs)), role


def _documented(schema: dict[str, Any], url: str) -> set[str]:
    """The query parameters the schema documents for ``GET url`` (the path that matches it
    with the fewest placeholders: ``scheduling-cycles/latest/`` is not ``{id}``)."""
    found = []
    for path, operations in schema["paths"].items():
        if "get" not in operations:
            continue
        parts = re.split(r"\{[^/}]+\}", path)
        if re.fullmatch("[^/]+".join(re.escape(part) for part in parts), url):
            found.append((len(parts), operations["get"]))
    if not found:
        assert url in UNDESCRIBED, f"GET {url} is not in the schema"
        return set()
    operation = min(found, key=lambda each: each[0])[1]
    return {each["name"] for each in operation.get("parameters", []) if each["in"] == "query"}


def _fields(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 400, (response.status_code, response.content[:400])
    fields: dict[str, list[str]] = response.json()["error"]["fields"]
    return fields


def _taken(message: str) -> set[str]:
    found = TAKES.search(message)
    assert found, message
    return set(found.group(1).split(", "))


# ----------------------------------------------------------------------------- every read


@pytest.mark.parametrize("route", _read_cases())
def test_every_read_refuses_an_unknown_parameter_listing_what_the_schema_documents(
    world: Any, api_as: Any, schema: dict[str, Any], route: str
) -> None:
    url, role = _address(world, route)
    fields = _fields(api_as(role).get(url, {NOT_A_PARAMETER: "1"}))
    assert list(fields) == [NOT_A_PARAMETER]
    assert fields[NOT_A_PARAMETER][0].startswith(UNKNOWN)
    assert _taken(fields[NOT_A_PARAMETER][0]) == _documented(schema, url) | {"format"}


@pytest.mark.parametrize("route", _read_cases())
def test_every_parameter_the_schema_documents_is_taken(
    world: Any, api_as: Any, schema: dict[str, Any], route: str
) -> None:
    """Each documented parameter, sent empty (no filter): none is refused as unknown (one
    that cannot read an empty value, ``cursor``, is refused for its value, naming it)."""
    url, role = _address(world, route)
    documented = _documented(schema, url)
    answer = api_as(role).get(url, dict.fromkeys(documented | {"format"}, ""))
    if answer.status_code == 400:
        fields = _fields(answer)
        assert set(fields) <= documented, fields
        assert not any(m.startswith(UNKNOWN) for ms in fields.values() for m in ms), fields
    else:
        assert answer.status_code == 200, (answer.status_code, answer.content[:400])


# ----------------------------------------------------------------------------- typos


@pytest.mark.parametrize(
    ("url", "typo", "meant"),
    [
        ("/api/v1/workloads/?stat=pending", "stat", "state"),
        ("/api/v1/nodes/?flavour=h100", "flavour", "flavor"),
        ("/api/v1/preemptions/?tenat=nlp", "tenat", "tenant"),
        ("/api/v1/reports/usage/?tenat=nlp", "tenat", "tenant"),
        ("/api/v1/reports/attribution/?perod=day", "perod", "period"),
        ("/api/v1/utilization/tenants/?windw=6h", "windw", "window"),
        ("/api/v1/utilization/wasters/?limt=5", "limt", "limit"),
        ("/api/v1/usage/?started_afer=2026-01-01T00:00:00Z", "started_afer", "started_after"),
        ("/api/v1/tenants/?pagesize=1", "pagesize", "page_size"),
    ],
)
def test_a_misspelt_parameter_is_a_400_naming_it_and_the_one_meant(
    world: Any, api_as: Any, url: str, typo: str, meant: str
) -> None:
    pool(world)
    fields = _fields(api_as("admin").get(url))
    assert list(fields) == [typo]
    message = fields[typo][0]
    assert message.startswith(f"{UNKNOWN} (did you mean {meant}?)")
    assert meant in _taken(message)


def test_a_misspelt_state_no_longer_answers_every_workload(world: Any, api_as: Any) -> None:
    pool(world)
    admin = api_as("admin")
    every = admin.get("/api/v1/workloads/").json()["count"]
    assert every > 0
    assert admin.get("/api/v1/workloads/?stat=succeeded").status_code == 400
    spelt = admin.get("/api/v1/workloads/?state=succeeded").json()
    assert spelt["count"] < every


@pytest.mark.parametrize(
    ("url", "typo"),
    [
        ("/api/v1/workloads/?format=csv&stat=pending", "stat"),
        ("/api/v1/reports/workloads/?format=csv&tenat=nlp", "tenat"),
        ("/api/v1/utilization/wasters/?format=csv&windw=6h", "windw"),
    ],
)
def test_a_csv_export_refuses_a_misspelt_parameter_in_its_error_row(
    world: Any, api_as: Any, url: str, typo: str
) -> None:
    answer = api_as("admin").get(url)
    assert answer.status_code == 400
    assert answer["Content-Type"].startswith("text/csv")
    header, row = answer.content.decode().splitlines()[:2]
    assert header == "status,code,message"
    assert row.startswith(f'400,invalid,"{typo}: {UNKNOWN}')


def test_several_unknown_parameters_are_all_named(world: Any, api_as: Any) -> None:
    fields = _fields(api_as("admin").get("/api/v1/queues/?lef=true&tennant=nlp&leaf=true"))
    assert set(fields) == {"lef", "tennant"}


def test_a_report_still_says_which_filters_it_applies(world: Any, api_as: Any) -> None:
    fields = _fields(api_as("admin").get("/api/v1/reports/capacity/?tenant=nlp"))
    message = fields["tenant"][0]
    assert message.startswith("this report does not filter by tenant; it filters by flavor")
    assert "tenant" not in _taken(message) and "flavor" in _taken(message)


# ----------------------------------------------------------------------------- methods, callers


def test_head_and_options_take_what_get_takes(world: Any, api_as: Any) -> None:
    admin = api_as("admin")
    for method in (admin.head, admin.options):
        assert method("/api/v1/workloads/?stat=pending").status_code == 400
        assert method("/api/v1/workloads/?state=pending").status_code == 200
        assert method("/api/v1/tenants/nlp/?zz=1").status_code == 400
        assert method("/api/v1/tenants/nlp/").status_code == 200


def test_who_asks_is_checked_before_what_is_asked(world: Any, api_as: Any) -> None:
    assert api_as("anonymous").get("/api/v1/workloads/?stat=pending").status_code == 401
    # scheduling cycles are the admins'
    assert api_as("member").get("/api/v1/scheduling-cycles/?stat=ok").status_code == 403


def test_a_write_is_not_refused_for_its_query(world: Any, api_as: Any) -> None:
    """Only reads are checked: a write's input is its body (refused by ``StrictInput``)."""
    body = {"user": "fin", "tenant": "nlp", "role": "member"}
    made = api_as("lead").post("/api/v1/memberships/?zz=1", body, format="json")
    assert made.status_code == 201, made.content


# ----------------------------------------------------------------------------- what is taken


def test_filters_ordering_and_pages_are_taken(world: Any, api_as: Any) -> None:
    pool(world)
    admin = api_as("admin")
    pending = admin.get(
        "/api/v1/workloads/?state=pending&queue=nlp-train&ordering=-submitted_at&page=1&page_size=5"
    )
    assert pending.status_code == 200, pending.content
    assert pending.json()["results"]
    assert {row["state"] for row in pending.json()["results"]} == {"pending"}
    first = admin.get("/api/v1/tenants/?page=1&page_size=1").json()
    assert len(first["results"]) == 1 and first["next"]
    assert admin.get(first["next"]).status_code == 200
    assert admin.get("/api/v1/tenants/?page=last&page_size=1&format=json").status_code == 200
    report = admin.get("/api/v1/reports/usage/?by=tenant&period=day&page=1&page_size=5")
    assert report.status_code == 200, report.content
    window = admin.get("/api/v1/utilization/wasters/?window=6h&limit=5&format=csv")
    assert window.status_code == 200, window.content


def test_the_cursor_of_a_log_is_taken(world: Any, api_as: Any) -> None:
    _usage_interval(world)
    admin = api_as("admin")
    first = admin.get("/api/v1/usage/?page_size=1&open=true").json()
    assert len(first["results"]) == 1 and first["next"]
    assert "cursor=" in first["next"]
    second = admin.get(first["next"])
    assert second.status_code == 200, second.content
    assert second.json()["results"][0]["id"] != first["results"][0]["id"]


def test_the_schema_documents_the_400_on_every_read(schema: dict[str, Any]) -> None:
    reads = [
        path
        for path, operations in schema["paths"].items()
        if "get" in operations and "400" not in operations["get"]["responses"]
    ]
    assert reads == []


# ----------------------------------------------------------------------------- the client


class _ThroughTheTestClient(Api):
    """The command-line client's API, answered by the test client (every read must succeed)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.read: list[str] = []

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, Any] | None = None,
        auth: bool = True,
    ) -> Any:
        assert method == "GET" and body is None
        url = f"/api/v1/{path}" + (f"?{urlencode(query, doseq=True)}" if query else "")
        self.read.append(url)
        answer = self.client.get(url)
        assert answer.status_code in (200, 404), (url, answer.status_code, answer.content[:400])
        return answer.json()


@pytest.mark.parametrize(
    ("command", "do"),
    [
        (["status", "--state", "pending", "--queue", "nlp-train", "--namespace", "nlp"], do_status),
        (["status"], do_status),
        (["nodes", "--flavor", "h100", "--state", "ready", "--unhealthy"], do_nodes),
    ],
)
def test_the_command_line_clients_queries_are_taken(
    world: Any, api_as: Any, command: list[str], do: Any
) -> None:
    pool(world)
    api = _ThroughTheTestClient(api_as("admin"))
    options = parser().parse_args(["--json", *command])
    assert do(api, options, io.StringIO()) == 0
    assert any("?" in url for url in api.read)
