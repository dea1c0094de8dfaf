"""What the API takes, it reads as sent; what it cannot read, it refuses naming it.

- A body's key that names no field is a 400 naming it, on every write route of the URL conf
  (``gpupool.api.strict.StrictInput``), nested ones dotted (``pod_sets.0.extra``), and nothing
  is written; a read-only field sent back, and the browsable API's CSRF token, are no error.
- A workload's command and environment are strings: a number is refused as ``true`` is.
- Paging: ``?page_size=`` is read alike on numbered and cursor lists, ``?cursor=`` and
  ``?page=`` that do not read are 400s naming them (a page past the last stays a 404).
- A report refuses a filter it does not apply (the capacity report is the pool's) and its
  schema does not offer it.
- The schema documents 406, 409, 415 and 429 where they are answered.
- Every CSV answer is ``text/csv; charset=utf-8``.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from access_matrix import ROLES, ROWS
from django.core.cache import cache
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator
from resources_pool import pool
from test_permission_matrix import api_routes

from gpupool.api.views import TokenThrottle
from gpupool.quotas.models import Queue, QuotaRequest
from gpupool.tenancy.models import Membership
from gpupool.workloads.models import Workload

pytestmark = pytest.mark.django_db

WRITES = ("POST", "PUT", "PATCH")
ERROR = {"$ref": "#/components/schemas/Error"}
UNKNOWN = "zz_not_a_field"


def _write_cases() -> list[Any]:
    cases = []
    for name, methods in sorted(api_routes().items()):
        for method in sorted(methods & set(WRITES)):
            cases.append(pytest.param(name, method, id=f"{name}-{method}"))
    return cases


def _fields(response: Any) -> dict[str, list[str]]:
    assert response.status_code == 400, (response.status_code, response.content[:400])
    fields: dict[str, list[str]] = response.json()["error"]["fields"]
    return fields


@pytest.fixture
def schema(db: Any) -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-any-return]


def _workload_body(**overrides: Any) -> dict[str, Any]:
    pod_set = {"count": 1, "gpus": 1, "flavor": "h100", "image": "pytorch"}
    body = {"name": "strict-1", "queue": "nlp-train", "pod_sets": [pod_set]}
    return body | overrides


# ----------------------------------------------------------------------------- unknown fields


@pytest.mark.parametrize(("route", "method"), _write_cases())
def test_every_write_route_refuses_an_unknown_field(
    world: Any, api_as: Any, route: str, method: str
) -> None:
    """Every POST, PUT and PATCH of the URL conf (the permission matrix's routes, so a new
    one is covered), as a role the matrix lets through, with the matrix's body (or none) and
    one key that names no field: a 400 naming that key."""
    row = ROWS[route]
    role = next(r for r in ROLES if row.outcome(method, r, "own") == "ok")
    kwargs = row.target(world)["own"] if row.target is not None else {}
    body = dict(row.payload(world)) if row.payload is not None else {}
    cache.clear()  # (the token route is throttled per address)
    response = getattr(api_as(role), method.lower())(
        reverse(route, kwargs=dict(kwargs)), body | {UNKNOWN: 1}, format="json"
    )
    assert _fields(response).get(UNKNOWN) == ["Unknown field."]


def test_a_workload_with_an_unknown_field_is_refused_and_not_submitted(
    world: Any, api_as: Any
) -> None:
    pool(world)
    before = Workload.objects.count()
    lead = api_as("lead")
    misspelt = lead.post(
        "/api/v1/workloads/", _workload_body(priority_clas="urgent", extra="x"), format="json"
    )
    assert _fields(misspelt) == {"priority_clas": ["Unknown field."], "extra": ["Unknown field."]}
    nested = _workload_body()
    nested["pod_sets"][0]["extra"] = "x"
    assert _fields(lead.post("/api/v1/workloads/", nested, format="json")) == {
        "pod_sets.0.extra": ["Unknown field."]
    }
    dry_run = lead.post("/api/v1/workloads/dry-run/", nested, format="json")
    assert _fields(dry_run) == {"pod_sets.0.extra": ["Unknown field."]}
    assert Workload.objects.count() == before
    # Unknown keys are named with the body's other errors, not after them.
    both = lead.post("/api/v1/workloads/", {"queue": "nlp-train", "extra": 1}, format="json")
    assert {"name", "pod_sets", "extra"} <= set(_fields(both))
    assert lead.post("/api/v1/workloads/", _workload_body(), format="json").status_code == 201


def test_a_quota_request_or_queue_change_with_an_unknown_field_changes_nothing(
    world: Any, api_as: Any
) -> None:
    pool(world)
    body = {
        "kind": "queue-quota",
        "queue": "nlp-train",
        "flavor": "h100",
        "payload": {"guarantee": 0, "deserved": 8, "capability": 16},
        "justification": "more",
        "extra": 1,
    }
    answer = api_as("lead").post("/api/v1/quota-requests/", body, format="json")
    assert _fields(answer) == {"extra": ["Unknown field."]}
    assert not QuotaRequest.objects.exists()
    weight = Queue.objects.get(name="nlp-train").weight
    patch = api_as("admin").patch(
        "/api/v1/queues/nlp-train/", {"weight": weight + 1, "bogus": 1}, format="json"
    )
    assert _fields(patch) == {"bogus": ["Unknown field."]}
    assert Queue.objects.get(name="nlp-train").weight == weight


def test_a_read_only_field_sent_back_and_the_forms_csrf_token_are_no_error(
    world: Any, api_as: Any
) -> None:
    """A row read can be sent back: its read-only fields are fields (ignored), not unknown;
    the browsable API's HTML forms post Django's CSRF token with the fields."""
    admin = api_as("admin")
    tenant = admin.get("/api/v1/tenants/nlp/").json()
    sent_back = admin.put("/api/v1/tenants/nlp/", tenant | {"display_name": "NLP"}, format="json")
    assert sent_back.status_code == 200, sent_back.content
    assert sent_back.json()["display_name"] == "NLP"
    pool(world)
    form = admin.post(
        "/api/v1/nodes/n1/cordon/",
        {"reason": "maintenance", "csrfmiddlewaretoken": "x" * 32},
        format="multipart",
    )
    assert form.status_code == 200, form.content


def test_an_action_that_takes_no_body_refuses_one_that_says_something(
    world: Any, api_as: Any
) -> None:
    from access_matrix import _quota_request

    draft = _quota_request(world)["own"]["pk"]
    lead = api_as("lead")
    url = f"/api/v1/quota-requests/{draft}/submit/"
    assert _fields(lead.post(url, {"note": "please"}, format="json")) == {
        "note": ["Unknown field."]
    }
    assert QuotaRequest.objects.get(pk=draft).state == "draft"
    assert lead.post(url, {}, format="json").status_code == 200


def test_a_membership_with_an_unknown_field_is_not_added(world: Any, api_as: Any) -> None:
    body = {"user": "fin", "tenant": "nlp", "role": "member", "expires": "2027-01-01"}
    assert _fields(api_as("lead").post("/api/v1/memberships/", body, format="json")) == {
        "expires": ["Unknown field."]
    }
    assert not Membership.objects.filter(user__username="fin").exists()


# ----------------------------------------------------------------------------- strings


def test_a_command_or_environment_value_that_is_no_string_is_refused(
    world: Any, api_as: Any
) -> None:
    pool(world)
    body = _workload_body()
    body["pod_sets"][0] |= {"command": ["run", 1, 2.5, True], "env": {"A": 1, "B": "ok"}}
    fields = _fields(api_as("lead").post("/api/v1/workloads/", body, format="json"))
    assert set(fields) == {
        "pod_sets.0.command.1",
        "pod_sets.0.command.2",
        "pod_sets.0.command.3",
        "pod_sets.0.env.A",
    }
    # A number is refused as DRF refuses true.
    assert fields["pod_sets.0.env.A"] == fields["pod_sets.0.command.3"] == ["Not a valid string."]
    assert not Workload.objects.filter(name="strict-1").exists()
    body["pod_sets"][0] |= {"command": ["run", "1", "2.5"], "env": {"A": "1"}}
    made = api_as("lead").post("/api/v1/workloads/", body, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["pod_sets"][0]["command"] == ["run", "1", "2.5"]


# ----------------------------------------------------------------------------- paging


@pytest.mark.parametrize("size", ["0", "abc", "5000", "-1"])
def test_the_usage_log_refuses_a_page_size_it_cannot_read(
    world: Any, api_as: Any, size: str
) -> None:
    answer = api_as("admin").get(f"/api/v1/usage/?page_size={size}")
    assert list(_fields(answer)) == ["page_size"]


def test_the_usage_log_refuses_a_cursor_it_did_not_give(world: Any, api_as: Any) -> None:
    from access_matrix import _usage_interval

    _usage_interval(world)
    admin = api_as("admin")
    answer = admin.get("/api/v1/usage/?cursor=garbage")
    assert list(_fields(answer)) == ["cursor"]
    first = admin.get("/api/v1/usage/?page_size=1").json()
    assert len(first["results"]) == 1 and first["next"]
    second = admin.get(first["next"])
    assert second.status_code == 200
    assert second.json()["results"][0]["id"] != first["results"][0]["id"]


@pytest.mark.parametrize("page", ["abc", "0", "-2", "1.5"])
def test_a_page_number_that_does_not_read_is_a_400_naming_page(
    world: Any, api_as: Any, page: str
) -> None:
    answer = api_as("admin").get(f"/api/v1/tenants/?page={page}")
    assert list(_fields(answer)) == ["page"]


def test_a_page_past_the_last_is_still_a_404(world: Any, api_as: Any) -> None:
    admin = api_as("admin")
    assert admin.get("/api/v1/tenants/?page=99").status_code == 404
    assert admin.get("/api/v1/tenants/?page=last").status_code == 200
    assert admin.get("/api/v1/tenants/?page=1").status_code == 200


# ----------------------------------------------------------------------------- reports


@pytest.mark.parametrize(
    ("report", "parameter"),
    [
        ("capacity", "tenant"),
        ("capacity", "queue"),
        ("capacity", "priority_class"),
        ("attribution", "priority_class"),
        ("workloads", "priority_class"),
    ],
)
def test_a_report_refuses_a_filter_it_does_not_apply(
    world: Any, api_as: Any, report: str, parameter: str
) -> None:
    answer = api_as("admin").get(f"/api/v1/reports/{report}/?{parameter}=nlp")
    fields = _fields(answer)
    assert list(fields) == [parameter]
    assert "does not filter by" in fields[parameter][0]


def test_a_report_takes_the_filters_it_applies(world: Any, api_as: Any) -> None:
    admin = api_as("admin")
    for url in (
        "/api/v1/reports/capacity/?flavor=h100",
        "/api/v1/reports/usage/?tenant=nlp&queue=q&priority_class=normal&flavor=h100",
        "/api/v1/reports/attribution/?tenant=nlp&queue=q&flavor=h100",
        "/api/v1/reports/workloads/?tenant=nlp&queue=q&flavor=h100",
    ):
        assert admin.get(url).status_code == 200, url


def test_the_schema_offers_each_report_only_the_filters_it_applies(
    schema: dict[str, Any],
) -> None:
    def offered(path: str) -> set[str]:
        parameters = schema["paths"][path]["get"].get("parameters", [])
        return {each["name"] for each in parameters if each["in"] == "query"}

    filters = {"tenant", "queue", "flavor", "priority_class"}
    assert offered("/api/v1/reports/capacity/") & filters == {"flavor"}
    assert offered("/api/v1/reports/attribution/") & filters == {"tenant", "queue", "flavor"}
    assert offered("/api/v1/reports/workloads/") & filters == {"tenant", "queue", "flavor"}
    assert offered("/api/v1/reports/usage/") & filters == filters


# ----------------------------------------------------------------------------- statuses


def _documented(schema: dict[str, Any], path: str, method: str, code: str) -> bool:
    content = schema["paths"][path][method]["responses"].get(code, {}).get("content", {})
    return bool(content.get("application/json", {}).get("schema") == ERROR)


def test_the_schema_documents_406_409_415_and_429_where_they_are_answered(
    schema: dict[str, Any],
) -> None:
    assert _documented(schema, "/api/v1/workloads/dry-run/", "post", "409")
    assert _documented(schema, "/api/v1/fragmentation/", "get", "409")
    assert not _documented(schema, "/api/v1/workloads/", "post", "409")
    assert _documented(schema, "/api/v1/tokens/", "post", "429")
    assert not _documented(schema, "/api/v1/workloads/", "post", "429")
    missing = [
        f"{method} {path} {code}"
        for path, operations in schema["paths"].items()
        for method in operations
        for code in ("406", "415")
        if (code == "406" or method in ("post", "put", "patch"))
        and not _documented(schema, path, method, code)
    ]
    assert missing == []


def test_the_answers_the_schema_documents_have_the_error_shape(
    world: Any, api_as: Any, schema: dict[str, Any], monkeypatch: Any
) -> None:
    shape = ERROR | {"components": schema["components"]}
    admin = api_as("admin")
    not_offered = admin.get("/api/v1/tenants/?format=xml")
    assert not_offered.status_code == 406
    jsonschema.validate(not_offered.json(), shape)
    unread = admin.post("/api/v1/tenants/", "name=x", content_type="text/plain")
    assert unread.status_code == 415
    jsonschema.validate(unread.json(), shape)
    cache.clear()
    monkeypatch.setattr(TokenThrottle, "rate", "1/minute")
    anonymous = api_as("anonymous")
    wrong = {"username": "nobody", "password": "wrong"}
    assert anonymous.post("/api/v1/tokens/", wrong, format="json").status_code == 401
    throttled = anonymous.post("/api/v1/tokens/", wrong, format="json")
    assert throttled.status_code == 429
    jsonschema.validate(throttled.json(), shape)
    cache.clear()


# ----------------------------------------------------------------------------- CSV


CSV_TYPE = "text/csv; charset=utf-8"


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/workloads/?format=csv",
        "/api/v1/usage/?format=csv",
        "/api/v1/reports/capacity/?format=csv",
        "/api/v1/preemptions/?format=csv",
        "/api/v1/budgets/?format=csv",
        "/api/v1/quota-requests/?format=csv",
        "/api/v1/utilization/tenants/?format=csv",
        "/api/v1/utilization/wasters/?format=csv",
        "/api/v1/usage/?format=csv&page_size=0",  # an error, as one row
    ],
)
def test_every_csv_answer_declares_utf_8(world: Any, api_as: Any, url: str) -> None:
    answer = api_as("admin").get(url)
    assert answer.status_code in (200, 400), (url, answer.status_code)
    assert answer["Content-Type"] == CSV_TYPE
