"""A read takes only the query parameters its endpoint declares: any other is a 400 naming it.

DRF and django-filter drop a query parameter they do not know, so a misspelt filter
(``workloads/?stat=pending``) answers every row and looks filtered. Every read (GET, and HEAD
and OPTIONS as GET) checks its parameters against those its endpoint takes, and a name it
does not take is a 400 naming it and listing those it does (``{"stat": ["unknown query
parameter (did you mean state?); this endpoint takes format, namespace, ..."]}``), as a
body's unknown key is (``strict.py``).

What an endpoint takes is read from what the view already declares, never from a list kept
beside it (``accepted_query_parameters``), and is what the OpenAPI schema documents:

- ``format`` (DRF's ``URL_FORMAT_OVERRIDE``) everywhere: a format not offered is a 406;
- on a list -- a viewset's ``list``, or an ``@action`` that declares what it lists by
  (``filterset_class``, ``ordering_fields``, ``pagination_class``, ...: a budget's
  ``ledger/``) -- the parameters of its filter backends (every filter of its filter set, as its
  form reads them; ``ordering``) and of its paginator (``page`` and ``page_size``, or
  ``cursor`` and ``page_size``);
- the query parameters the action's ``@extend_schema(parameters=...)`` declares: each
  ``OpenApiParameter`` in the query, each writable field of a serializer given there (a
  report's query serializer, utilisation's ``window``, ``since``, ``until``, ``limit``).

A detail answers no filter (DRF's ``get_object`` would filter by one: the object, or 404);
the schema documents none there either. The check runs in ``permissions.ActionRoles``, the
one permission every API view has, after the caller is known and allowed: an anonymous typo
is still a 401. ``tests/api/test_unknown_query_params.py`` checks every read route of the URL
conf against the schema, both ways.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from inspect import isclass
from typing import Any

from django import forms
from django_filters.rest_framework import DjangoFilterBackend
from django_filters.widgets import SuffixedMultiWidget
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.mixins import ListModelMixin
from rest_framework.request import Request
from rest_framework.settings import api_settings

# The methods that read: OPTIONS and HEAD take what GET takes.
READS = frozenset({"GET", "HEAD", "OPTIONS"})
# What an ``@action`` declares when it answers a list of its own (filtered, sorted, paged).
LIST_SETTINGS = frozenset(
    {
        "filterset_class",
        "filterset_fields",
        "filter_backends",
        "ordering_fields",
        "search_fields",
        "pagination_class",
    }
)
UNKNOWN = "unknown query parameter"


def reading_action(view: Any) -> str | None:
    """The viewset action that answers GET at this address (None: not a viewset)."""
    action_map = getattr(view, "action_map", None)
    if action_map is None:
        return None
    action: str | None = action_map.get("get")
    return action


def answers_a_list(view: Any, action: str | None) -> bool:
    """Whether the read filters and pages what it answers: a generic view's list."""
    if not hasattr(view, "filter_queryset"):
        return False  # not a generic view: nothing is filtered or paged for it
    if action is None:
        return isinstance(view, ListModelMixin)
    if action == "list":
        return True
    handler = getattr(view, action, None)
    return bool(LIST_SETTINGS & set(getattr(handler, "kwargs", {})))


def _widget_names(name: str, widget: forms.Widget) -> list[str]:
    """The query parameters a form widget of ``name`` reads (a range reads two)."""
    if isinstance(widget, SuffixedMultiWidget):
        return [widget.suffixed(name, suffix) for suffix in widget.suffixes]
    if isinstance(widget, forms.MultiWidget):
        # (Django names each part's parameter: widgets_names, "_0", "_1" unless named)
        suffixes = getattr(widget, "widgets_names", [f"_{i}" for i in range(len(widget.widgets))])
        return [name + suffix for suffix in suffixes]
    return [name]


def filterset_parameters(backend: DjangoFilterBackend, view: Any) -> set[str]:
    """The parameters the view's filter set reads: each filter's, as its form reads it."""
    queryset = getattr(view, "queryset", None)
    if queryset is None and getattr(view, "filterset_fields", None):
        queryset = view.get_queryset()
    filterset_class = backend.get_filterset_class(view, queryset)
    if filterset_class is None:
        return set()
    form = filterset_class(queryset=queryset, request=getattr(view, "request", None)).form
    return {
        parameter
        for name, field in form.fields.items()
        for parameter in _widget_names(form.add_prefix(name), field.widget)
    }


def _schema_names(parameters: Iterable[dict[str, Any]]) -> set[str]:
    return {each["name"] for each in parameters if each.get("in") == "query"}


def list_parameters(view: Any) -> set[str]:
    """What a list reads: its filter backends' parameters and its paginator's."""
    names: set[str] = set()
    for backend_class in getattr(view, "filter_backends", ()) or ():
        backend = backend_class()
        if isinstance(backend, DjangoFilterBackend):
            names |= filterset_parameters(backend, view)
        else:  # DRF's declaration of what a backend reads (``ordering``, ``search``)
            names |= _schema_names(backend.get_schema_operation_parameters(view))
    paginator = getattr(view, "paginator", None)
    if paginator is not None:
        names |= _schema_names(paginator.get_schema_operation_parameters(view))
    return names


def declared_parameters(view: Any, action: str | None) -> set[str]:
    """The query parameters the read's ``@extend_schema(parameters=...)`` declares."""
    handler = getattr(view, action or "get", None)
    found = getattr(handler, "kwargs", {}).get("schema") or getattr(view, "schema", None)
    if found is None:
        return set()
    inspector: Any = found() if isclass(found) else type(found)()
    if not hasattr(inspector, "get_override_parameters"):
        return set()
    inspector.view = view
    inspector.method = "GET"
    names: set[str] = set()
    for parameter in inspector.get_override_parameters():
        if isinstance(parameter, OpenApiParameter):
            if parameter.location == OpenApiParameter.QUERY and not parameter.exclude:
                names.add(parameter.name)
            continue
        form = parameter() if isclass(parameter) else parameter
        if isinstance(form, serializers.BaseSerializer):
            fields = getattr(form, "fields", {})
            names |= {name for name, field in fields.items() if not field.read_only}
    return names


def accepted_query_parameters(view: Any) -> frozenset[str]:
    """Every query parameter a read of ``view`` takes (see the module's doc)."""
    action = reading_action(view)
    names = declared_parameters(view, action)
    if api_settings.URL_FORMAT_OVERRIDE:
        names.add(api_settings.URL_FORMAT_OVERRIDE)
    if answers_a_list(view, action):
        names |= list_parameters(view)
    return frozenset(names)


def unknown_parameter_message(name: str, accepted: Iterable[str], why: str | None = None) -> str:
    """The refusal of ``name``: why (``why``, else unknown, with the nearest name it takes),
    and every parameter the endpoint takes."""
    taken = sorted(accepted)
    if why is None:
        near = difflib.get_close_matches(name, taken, n=1)
        why = UNKNOWN + (f" (did you mean {near[0]}?)" if near else "")
    return f"{why}; this endpoint takes {', '.join(taken) or 'none'}"


def refuse_unknown_query_parameters(request: Request, view: Any) -> None:
    """For a read: a 400 naming every query parameter the endpoint does not take. A view may
    say why it refuses one (``query_parameter_refusal(name)``: a report names the filters it
    applies)."""
    if request.method not in READS:
        return
    asked = [name for name in request.query_params if name]
    if not asked:
        return
    accepted = accepted_query_parameters(view)
    unknown = [name for name in asked if name not in accepted]
    if not unknown:
        return
    explain = getattr(view, "query_parameter_refusal", None)
    raise ValidationError(
        {
            name: [unknown_parameter_message(name, accepted, explain(name) if explain else None)]
            for name in unknown
        }
    )
