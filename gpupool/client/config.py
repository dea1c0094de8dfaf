"""Where the client finds the server and its token: ``GPUPOOL_URL`` and ``GPUPOOL_TOKEN`` from
the environment, else the file ``gpupool login`` writes (``~/.config/gpupool/config``, or under
``$XDG_CONFIG_HOME``), readable by its owner only."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_URL = "http://127.0.0.1:8000"


class ConfigError(Exception):
    """The client cannot tell which server to talk to or with which token."""


@dataclass(frozen=True)
class Settings:
    """The server's base URL and the caller's API token ("" when not logged in)."""

    url: str
    token: str
    username: str = ""


def server_url_problem(text: str) -> str | None:
    """Why ``text`` is no server address (an http or https URL with a host), or None."""
    try:
        parts = urlsplit(text.strip())
    except ValueError as error:
        return f"{text!r} is not a server address: {error}"
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return f"{text!r} is not a server address like https://gpupool.example.org"
    return None


def config_path() -> Path:
    """``$XDG_CONFIG_HOME/gpupool/config``, by default ``~/.config/gpupool/config``."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gpupool" / "config"


def load() -> Settings:
    """The environment's settings over the config file's."""
    stored: dict[str, str] = {}
    path = config_path()
    if path.is_file():
        try:
            found = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise ConfigError(f"cannot read {path}: {error}") from None
        if isinstance(found, dict):
            stored = {key: str(value) for key, value in found.items()}
    url = os.environ.get("GPUPOOL_URL") or stored.get("url") or DEFAULT_URL
    if (problem := server_url_problem(url)) is not None:
        where = "GPUPOOL_URL" if os.environ.get("GPUPOOL_URL") else str(path)
        raise ConfigError(f"{where}: {problem}")
    token = os.environ.get("GPUPOOL_TOKEN") or stored.get("token", "")
    return Settings(url.rstrip("/"), token, stored.get("username", ""))


def save(settings: Settings) -> Path:
    """Write the settings where ``load`` finds them, readable by the owner only (0600)."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    text = json.dumps(
        {"url": settings.url, "token": settings.token, "username": settings.username}, indent=1
    )
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text + "\n")
    os.chmod(path, 0o600)  # an older file keeps its mode through O_CREAT
    return path
