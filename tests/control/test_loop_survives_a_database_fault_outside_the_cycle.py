"""A loop never stops on a database fault, even where no cycle row can say so: the demo's
loop process ended (and the demo with it) on a second "database is locked" raised while
SQLite was still locked and the loop wrote the row of the cycle that had just failed on the
first. ``ControlLoop.run_cycle`` answers such a fault as a failed cycle: logged, with no row,
and the next cycle reads everything again and runs."""

from __future__ import annotations

import logging

import pytest
from django.db import OperationalError
from loop_builders import build_world

from gpupool.control import loop as loop_module
from gpupool.control.loop import ControlLoop
from gpupool.control.models import SchedulingCycle

pytestmark = pytest.mark.django_db


def _locked(*_: object, **__: object) -> None:
    raise OperationalError("database is locked")


def test_a_failed_cycle_whose_row_cannot_be_written_fails_without_one_and_the_loop_goes_on(
    db: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    world = build_world(nodes=2)
    world.submit("train", gpus=4)
    world.cycle()  # makes the pods
    rows = SchedulingCycle.objects.count()
    # The cycle fails in its record; its row cannot be written either (the database locked).
    monkeypatch.setattr(loop_module, "decide_record", _locked)
    monkeypatch.setattr(loop_module, "do_start_cycle", _locked)
    with caplog.at_level(logging.ERROR):
        failed = world.loop.run_cycle()
    assert (failed.status, failed.cycle_id) == ("failed", None)
    assert failed.error.startswith("record: OperationalError: database is locked")
    assert "the failed cycle could not be recorded" in caplog.text
    assert SchedulingCycle.objects.count() == rows
    assert world.loop.first  # everything is read again next time

    monkeypatch.undo()
    after = world.cycle()
    assert after.status == "succeeded", after.error
    assert after.admitted == ["team-a/train"]


@pytest.mark.parametrize("where", ["_warm_up", "_cycle"])
def test_a_fault_outside_the_cycles_phases_is_a_failed_cycle_not_an_exception(
    db: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    """The warm-up's read before the lock, or anything the cycle itself lets through."""
    world = build_world(nodes=2)
    world.submit("train", gpus=4)
    world.cycle()
    monkeypatch.setattr(ControlLoop, where, _locked)
    with caplog.at_level(logging.ERROR):
        failed = world.loop.run_cycle()
    assert (failed.status, failed.cycle_id) == ("failed", None)
    assert failed.error == "OperationalError: database is locked"
    assert "scheduling cycle could not run" in caplog.text
    assert world.loop.first

    monkeypatch.undo()
    after = world.cycle()
    assert after.status == "succeeded", after.error
    assert after.admitted == ["team-a/train"]
