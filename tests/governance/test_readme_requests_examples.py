"""README.md tells the requests story as the product has it: the pages table names everyone
who opens the Requests page (``dashboard.navigation``), and each `gpupool` request command
of the client example runs as a demo user whose role may run it (a member may not list
requests), so the example works as written after ``make demo``."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from gpupool.cli.subcommands.seed_demo import demo_users
from gpupool.dashboard.navigation import PAGES_BY_KEY

README = Path(__file__).resolve().parents[2] / "README.md"
# The README's plural for each role of the API's (``gpupool.api.access``).
ROLE_WORDS = {"admin": "admins", "finance": "finance", "lead": "leads", "member": "members"}
# The roles that may run each request command (``requests_api``: leads, admins; finance reads).
MAY_RUN = {
    "requests": {"lead", "admin", "finance"},
    "request": {"lead", "admin"},
    "approve": {"admin"},
    "reject": {"admin"},
}


def role_of(username: str) -> str:
    """The demo user's role, from what ``seed_demo`` says it is."""
    what = dict(demo_users())[username]
    return next(role for role in ("admin", "finance", "lead", "member") if role in what)


def test_the_pages_table_names_everyone_who_opens_the_requests_page() -> None:
    row = next(line for line in README.read_text().splitlines() if line.startswith("| Requests |"))
    who = row.split("|")[2]
    for role in PAGES_BY_KEY["requests"].roles:
        assert ROLE_WORDS[role] in who, (role, row)
    assert "come next" not in README.read_text()  # no page promises what it already shows


def test_each_request_command_of_the_client_example_runs_as_a_user_who_may() -> None:
    user, checked = None, []
    for line in README.read_text().splitlines():
        if not re.match(r"gpupool (login|requests?|approve|reject) ", line):
            continue  # prose and the other commands
        words = shlex.split(line.split("#")[0].rstrip(" \\"))
        if words[1] == "login":
            user = words[words.index("--username") + 1]
        elif words[1] in MAY_RUN:
            assert user is not None, line
            assert role_of(user) in MAY_RUN[words[1]], (user, line)
            checked.append(words[1])
    assert {"requests", "request", "approve"} <= set(checked)
