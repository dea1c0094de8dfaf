"""The cycle lock of a database in memory (SQLite's, as the tests use) is the process's own:
two processes' in-memory databases of the same name are two databases, and a lock file named
after the name alone made one test run's cycles skip ("another scheduling cycle holds the
lock") while another run's cycle held it. A database on disk keeps one lock for everyone."""

from __future__ import annotations

import pytest
from django.db import connection

from gpupool.control import lock


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the file lock is SQLite's")
def test_an_in_memory_databases_lock_is_its_processs_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(connection.settings_dict, "NAME", "file:memorydb_default?mode=memory")
    here = lock.lock_file()
    assert lock.lock_file() == here  # the same process: the same lock
    monkeypatch.setattr(lock.os, "getpid", lambda: 1)
    assert lock.lock_file() != here


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the file lock is SQLite's")
def test_a_database_on_disk_has_one_lock_for_every_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.setitem(connection.settings_dict, "NAME", f"{tmp_path}/pool.sqlite3")
    here = lock.lock_file()
    monkeypatch.setattr(lock.os, "getpid", lambda: 1)
    assert lock.lock_file() == here
    assert str(here) == f"{tmp_path}/pool.sqlite3.cycle.lock"
