"""docker-compose.yml and the Dockerfile, checked without Docker.

The Compose file is validated against the Compose specification's JSON schema as shipped by
check-jsonschema (a dev dependency: its ``builtin_schemas/vendor/compose-spec.json`` is the
schema of https://github.com/compose-spec/compose-spec, Apache-2.0, licence beside it in the
package), then its variables are checked against what gpupool/settings.py reads.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import jsonschema
import pytest
import yaml
from deployment_files import (
    REQUIRED,
    ROOT,
    dockerfile_stages,
    role_commands,
    run_with_settings,
    settings_reads,
)
from django.conf import settings as django_settings
from django.urls import resolve

COMPOSE = ROOT / "docker-compose.yml"
GPUPOOL_SERVICES = ("migrate", "web", "scheduler", "worker", "beat")
SECRETS = {"SECRET_KEY": "test-secret-key", "POSTGRES_PASSWORD": "test-db-password"}


def compose_schema() -> dict[str, Any]:
    """The Compose specification's JSON schema, from the check-jsonschema package."""
    vendor = resources.files("check_jsonschema.builtin_schemas.vendor")
    schema: dict[str, Any] = json.loads(vendor.joinpath("compose-spec.json").read_text())
    return schema


def schema_errors(document: Any) -> list[str]:
    """Where and why ``document`` breaks the Compose specification; [] if it does not."""
    validator = jsonschema.Draft202012Validator(
        compose_schema(), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(document)]


def compose() -> dict[str, Any]:
    """docker-compose.yml as data (YAML anchors and merge keys resolved)."""
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's variable syntax: ``${NAME}``, ``${NAME:-default}``, ``${NAME:?error}``."""

    def one(match: re.Match[str]) -> str:
        name, operator, argument = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        if operator == ":?":
            raise KeyError(f"{name}: {argument}")
        return argument if operator == ":-" else ""

    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, value).replace("$$", "$")


def test_the_compose_file_follows_the_compose_specification() -> None:
    """The whole file validates against the specification's schema."""
    assert schema_errors(compose()) == []


def test_the_schema_check_refuses_what_compose_would_refuse() -> None:
    """A misspelt key and an unknown dependency condition are caught: the check is live."""
    broken = compose()
    broken["services"]["web"]["comand"] = broken["services"]["web"].pop("command")
    broken["services"]["worker"]["depends_on"]["migrate"]["condition"] = "service_done"
    errors = "\n".join(schema_errors(broken))
    assert "$.services.web" in errors and "comand" in errors
    assert "$.services.worker.depends_on" in errors and "service_done" in errors


def test_the_stack_runs_web_worker_and_beat_after_migrations() -> None:
    """PostgreSQL and Redis are health-checked; the app starts once `migrate` has succeeded."""
    services = compose()["services"]
    assert set(services) == {"postgres", "redis", *GPUPOOL_SERVICES}
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert services["web"]["command"][:2] == ["gunicorn", "gpupool.wsgi"]
    for name in ("scheduler", "worker"):
        assert services[name]["command"][:4] == ["celery", "-A", "gpupool", "worker"], name
    assert services["beat"]["command"][:4] == ["celery", "-A", "gpupool", "beat"]
    # The loop's queue is taken by one process; the other worker takes the default queue.
    scheduler, worker = services["scheduler"]["command"], services["worker"]["command"]
    assert scheduler[scheduler.index("--queues") + 1] == django_settings.GPUPOOL_CYCLE_QUEUE
    assert scheduler[scheduler.index("--concurrency") + 1] == "1"
    assert worker[worker.index("--queues") + 1] == "celery"
    for name in ("scheduler", "worker"):
        # the health probe pings the worker under the node name it runs as
        command, probe = services[name]["command"], services[name]["healthcheck"]["test"][1]
        node = command[command.index("--hostname") + 1] if "--hostname" in command else "celery@%h"
        assert f"--destination {node.replace('%h', '$$HOSTNAME')}" in probe, name
    for name in ("web", "scheduler", "worker", "beat"):
        assert services[name]["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"},
            "redis": {"condition": "service_healthy"},
        }
    for name in ("postgres", "redis", "web", "scheduler", "worker"):
        assert services[name]["healthcheck"]["test"], name


def test_each_role_runs_the_command_docs_operations_md_gives_it() -> None:
    """Every role of docs/operations.md's table is a service whose command starts with the
    table's (the service may add options after it, such as `--loglevel`)."""
    services = compose()["services"]
    commands = role_commands()
    assert set(commands) == set(GPUPOOL_SERVICES)
    for role, command in commands.items():
        assert services[role]["command"][: len(command)] == command, role


def test_the_web_healthcheck_asks_gpupools_healthz() -> None:
    """The probe's URL is the /healthz view on the port gunicorn binds."""
    web = compose()["services"]["web"]
    probe = " ".join(web["healthcheck"]["test"])
    url = re.search(r"http://127\.0\.0\.1:(\d+)(/\S*?)'", probe)
    assert url is not None, probe
    assert f"0.0.0.0:{url.group(1)}" in web["command"]
    assert resolve(url.group(2)).url_name == "healthz"


def test_every_gpupool_container_gets_exactly_variables_that_settings_read() -> None:
    """All that production needs is set, and nothing that settings.py would ignore."""
    read = settings_reads()
    assert read >= REQUIRED  # deployment_files.REQUIRED is still what settings.py reads
    for name in GPUPOOL_SERVICES:
        environment = compose()["services"][name]["environment"]
        assert set(environment) >= REQUIRED, name
        assert set(environment) <= read, f"{name}: {set(environment) - read} are never read"


def test_the_secrets_have_no_default() -> None:
    """Without SECRET_KEY or POSTGRES_PASSWORD in .env, Compose refuses to start."""
    environment = compose()["services"]["web"]["environment"]
    for missing in SECRETS:
        given = {k: v for k, v in SECRETS.items() if k != missing}
        with pytest.raises(KeyError, match=missing):
            {key: interpolate(str(value), given) for key, value in environment.items()}


def test_settings_load_in_production_mode_from_the_compose_environment() -> None:
    """With the file's values, Django runs with DEBUG off, PostgreSQL, Redis and the backend."""
    environment = compose()["services"]["worker"]["environment"]
    env = {key: interpolate(str(value), SECRETS) for key, value in environment.items()}
    probe = (
        "import json; from django.conf import settings as s; "
        "d = s.DATABASES['default']; print(json.dumps([s.DEBUG, d['ENGINE'], d['HOST'], "
        "d['NAME'], d['PASSWORD'], s.CELERY_BROKER_URL, s.CELERY_TASK_ALWAYS_EAGER, "
        "s.GPUPOOL_CLUSTER, s.GPUPOOL_KUBECONFIG, s.ALLOWED_HOSTS]))"
    )
    debug, engine, host, database, password, broker, eager, cluster, kubeconfig, hosts = json.loads(
        run_with_settings(env, probe)
    )
    assert debug is False
    assert (engine, host, database) == ("django.db.backends.postgresql", "postgres", "gpupool")
    assert password == SECRETS["POSTGRES_PASSWORD"]
    assert (broker, eager) == ("redis://redis:6379/0", False)
    assert (cluster, kubeconfig) == ("simulated", "/etc/gpupool/kube/kubeconfig")
    assert "127.0.0.1" in hosts  # the healthcheck's Host header


def test_the_image_installs_gpupool_and_collects_its_static_files() -> None:
    """python:3.11-slim, `pip install .`, collectstatic at build time, not run as root (the
    image's stage, the last: test_dockerfile.py checks the one before, which compiles)."""
    base, _, lines = dockerfile_stages()[-1]
    assert base == "python:3.11-slim"
    assert "RUN pip install ." in lines
    assert any("manage.py collectstatic --noinput" in line for line in lines)
    assert any(line.startswith("USER ") and line != "USER root" for line in lines)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".env", ".venv", ".k8s", "db.sqlite3"} <= set(ignored)  # no secrets, no local state
