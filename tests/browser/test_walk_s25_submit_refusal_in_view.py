"""Walk s25, in headless Chromium: on My workloads, a member whose submission the server sent
back (a name that is no DNS label) saw the top of the page again, their list of workloads,
with nothing to say the workload was not submitted: the form and its errors were under a page
of rows, out of view. The page sent back opens at the form, its refusal in view."""

from __future__ import annotations

from typing import Any

from browser_world import wait
from django.utils import timezone
from test_pages_in_chromium import log_in, open_page

IN_VIEW = """element => {
  const box = element.getBoundingClientRect();
  return box.top >= 0 && box.bottom <= window.innerHeight;
}"""


def test_a_refused_submission_opens_at_the_form_with_its_error_in_view(
    world: Any, live_server: Any, browser: Any
) -> None:
    now = timezone.now()
    # a team with a page of work: the form is far below the top of the page
    for index in range(30):
        wait(f"sweep-{index}", "nlp", 8, 1, "quota", "nlp is at its capability.", now)
    page, problems = open_page(browser)
    log_in(page, live_server.url, "nlp-member", world.password("nlp-member"))
    assert page.url == f"{live_server.url}/workloads/"
    page.get_by_label("Name").fill("Not A DNS Label")
    page.get_by_label("GPU flavor").select_option("h100")
    page.get_by_role("button", name="Submit", exact=True).click()
    page.wait_for_load_state()
    error = page.locator("#id_name_error")
    assert "DNS label" in error.inner_text()
    assert page.get_by_role("heading", name="Submit work").evaluate(IN_VIEW)
    assert error.evaluate(IN_VIEW)
    # the focus is on the field in error, and the page's address is the form's own (no
    # fragment that a submission that succeeds would carry on to the workload's page)
    assert page.evaluate("document.activeElement.id") == "id_name"
    assert page.url == f"{live_server.url}/workloads/submit/"
    # what the member typed is still there
    assert page.get_by_label("Name").input_value() == "Not A DNS Label"
    # the refusal itself answers 400 (and the console says so); nothing else failed
    refusal = (
        "400 ",
        "console: Failed to load resource: the server responded with a status of 400",
    )
    assert [problem for problem in problems if not problem.startswith(refusal)] == []
