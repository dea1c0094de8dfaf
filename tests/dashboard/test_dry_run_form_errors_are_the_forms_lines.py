"""The live dry-run's "Not checked yet" lines are the form's problems as every form of the
pages says them (``forms.form_problem_lines``: one line per problem, "<label>: why"), not a
copy of that rule of its own, which ran a field's problems together in one line
("Expected runtime (hours): Ensure this value ... Ensure that there are ...")."""

from __future__ import annotations

import re
from typing import Any

from dashboard_pages import SUBMIT_FORM, text
from django.utils.html import escape

from gpupool.dashboard.forms import WorkloadForm, form_problem_lines


def lines(answer: str) -> list[str]:
    """The dry-run's list of problems, as its items read."""
    return re.findall(r"<li>(.*?)</li>", answer)


def test_each_problem_of_a_field_is_its_own_line_naming_the_fields_label(
    pool: Any, page_as: Any
) -> None:
    # Below 0.01 h and three decimal places: two problems of one field.
    sent = SUBMIT_FORM | {"expected_hours": "0.001", "pods": ""}
    answer = text(page_as("max").post("/workloads/dry-run/", sent, HTTP_HX_REQUEST="true"))
    assert "Not checked yet" in answer
    label = "Expected runtime (hours)"
    said = lines(answer)
    assert escape(f"{label}: Ensure this value is greater than or equal to 0.01.") in said
    assert escape(f"{label}: Ensure that there are no more than 2 decimal places.") in said
    assert escape("Pods: This field is required.") in said
    form = WorkloadForm(sent, queues=["nlp"])
    assert said == [escape(line) for line in form_problem_lines(form)]
