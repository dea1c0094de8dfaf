"""What the deployment files are checked against, shared by tests/deploy's tests.

docs/operations.md's table names each role and its command: docker-compose.yml and the
Kubernetes manifests (deploy/kubernetes) both run those commands. gpupool/settings.py says
which environment variables exist: both pass only those. The Dockerfile says the image's
command and user.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
DOCKERFILE = ROOT / "Dockerfile"
# The variables a production deployment must set (README "Configuration").
REQUIRED = {
    "DATABASE_URL",
    "REDIS_URL",
    "SECRET_KEY",
    "DEBUG",
    "ALLOWED_HOSTS",
    "GPUPOOL_CLUSTER",
    "GPUPOOL_KUBECONFIG",
}


def settings_reads() -> set[str]:
    """The environment variables gpupool/settings.py reads, found in its source."""
    tree = ast.parse((ROOT / "gpupool" / "settings.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            function = ast.unparse(node.func)
            if function in ("os.environ.get", "env_bool", "env_list"):
                names.add(str(node.args[0].value))
    if "dj_database_url.config" in ast.unparse(tree):
        names.add("DATABASE_URL")  # dj_database_url.config() reads it by default
    return names


def role_commands() -> dict[str, list[str]]:
    """Each role's command as docs/operations.md's first table gives it, split as a shell
    would: ``{"web": ["gunicorn", "gpupool.wsgi", ...], ...}``."""
    lines = OPERATIONS.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"\|\s*role\s*\|\s*command", line))
    commands = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        command = re.fullmatch(r"`([^`]+)`", cells[1])
        assert command is not None, f"docs/operations.md: no `command` in {line!r}"
        commands[cells[0]] = shlex.split(command.group(1))
    return commands


def image_command() -> list[str]:
    """The Dockerfile's CMD (exec form)."""
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("CMD "):
            command: list[str] = ast.literal_eval(line.removeprefix("CMD ").strip())
            return command
    raise AssertionError("the Dockerfile has no CMD")


def dockerfile_stages() -> list[tuple[str, str, list[str]]]:
    """The Dockerfile's stages, in order: (base image, name or "", instructions), comment
    lines left out and continued lines joined (``ENV A=1 \\`` ... ``B=2``: one instruction)."""
    found: list[tuple[str, str, list[str]]] = []
    kept = [
        line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")
    ]
    for line in re.sub(r"\\\n", " ", "\n".join(kept)).splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("FROM "):
            words = line.split()
            name = words[3] if len(words) == 4 and words[2].upper() == "AS" else ""
            found.append((words[1], name, []))
        else:
            found[-1][2].append(line)
    return found


def image_uid() -> int:
    """The uid of the user the image runs as (the Dockerfile's ``useradd --uid``)."""
    found = re.search(r"useradd\b[^\n]*--uid\s+(\d+)", DOCKERFILE.read_text())
    assert found is not None, "the Dockerfile makes no user with a fixed uid"
    return int(found.group(1))


def run_with_settings(environment: dict[str, str], code: str) -> str:
    """Run ``code`` after ``django.setup()`` in a fresh Python whose gpupool settings come from
    ``environment`` alone (none of this process's variables that settings.py reads); its
    standard output."""
    keep = {k: v for k, v in os.environ.items() if k not in settings_reads()}
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup()\n{code}"],
        env={**keep, **environment, "DJANGO_SETTINGS_MODULE": "gpupool.settings"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout
