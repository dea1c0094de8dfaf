"""A user's flows through My workloads in headless Chromium: submitting work with the live
dry-run in view, finding its position and why it waits, then seeing it run, as the control
loop (on the simulated cluster in the database, the living demo's) moves it along between
the steps; and a preempted user finding who preempted them and why."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from test_pages_in_chromium import log_in, open_page, shoot

from gpupool.cli.subcommands.seed_demo import demo_password, seed
from gpupool.clusters.simulated import SimulatedBackend, SimulatedCluster, VirtualClock
from gpupool.control.loop import ControlLoop
from gpupool.inventory.actions import do_set_node_cordoned
from gpupool.inventory.models import Node
from gpupool.simcluster.store import DatabaseStore, cluster_state
from gpupool.workloads.models import Workload


class LivingPool:
    """The demo pool on the simulated cluster in the database, and the loop that runs it."""

    def __init__(self) -> None:
        seed()
        state = cluster_state()
        self.clock = VirtualClock(state.last_reading)
        backend = SimulatedBackend(
            SimulatedCluster(DatabaseStore(state.pk, self.clock), self.clock)
        )
        self.loop = ControlLoop(backend)

    def cycle(self, seconds: float = 30) -> None:
        """Let ``seconds`` of cluster time pass, then run one scheduling cycle."""
        self.clock.advance(seconds)
        result = self.loop.run_cycle()
        assert result.status == "succeeded", result.error


@pytest.fixture
def living(transactional_db: Any, settings: Any) -> LivingPool:
    """The living demo's pool with one cycle run."""
    settings.REDIS_URL = ""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    pool = LivingPool()
    pool.cycle()
    return pool


def quiet(page: Any) -> None:
    """Leave the page once every request it made is answered: the live server shares its one
    in-memory SQLite connection with the test's thread, so no request may run beside a
    scheduling cycle."""
    page.wait_for_load_state("networkidle")
    page.goto("about:blank")
    page.wait_for_timeout(500)


def h100_nodes_cordoned(cordoned: bool) -> None:
    """Cordon (or uncordon) every h100 node, as an admin would on the Cluster page."""
    for node in Node.objects.filter(flavor__name="h100"):
        do_set_node_cordoned(node, cordoned=cordoned, acting_user=None, reason="maintenance")


def test_a_user_submits_work_sees_its_position_and_reason_then_sees_it_run(
    living: LivingPool, live_server: Any, browser: Any, screenshots: Path
) -> None:
    server = live_server.url
    h100_nodes_cordoned(True)
    living.cycle()
    page, problems = open_page(browser)
    log_in(page, server, "nlp-member", demo_password("nlp-member"))
    assert page.url == f"{server}/workloads/"
    # the form answers as the user types: would it start now, layer by layer
    page.get_by_label("Name").fill("eval-8")
    page.get_by_label("Queue").select_option("nlp")
    page.get_by_label("GPU flavor").select_option("h100")
    page.get_by_label("Pods").fill("1")
    page.get_by_label("GPUs per pod (MIG: instances)").fill("8")
    dry_run = page.locator("#dry-run")
    dry_run.get_by_text(re.compile("It would (start now|wait)")).wait_for()
    # the last keystroke's answer (the live server shares one in-memory SQLite connection
    # between its threads: no dry-run may still run when the form is sent)
    page.wait_for_timeout(800)
    page.wait_for_load_state("networkidle")
    assert "capacity" in dry_run.inner_text()
    shoot(page, screenshots, "member-submit-with-dry-run")
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(re.compile(r".*/workloads/nlp/eval-8/$"))
    assert page.get_by_text("nlp/eval-8 is queued").is_visible()

    # the cycles look at it (the first makes its pod): it waits, and the page says where and
    # why.
    mine = page.url
    quiet(page)
    living.cycle()
    living.cycle()
    page.goto(mine)
    waiting = Workload.objects.get(name="eval-8")
    assert waiting.state == "pending" and waiting.pending_reason
    assert page.get_by_role("heading", name="Why it waits").is_visible()
    why = page.locator("#live").inner_text()
    assert re.search(rf"Position in queue nlp\s+{waiting.queue_position}\s", why), why
    assert waiting.pending_detail.strip()[:40] in why
    shoot(page, screenshots, "member-workload-waiting")

    # the nodes come back: the loop admits it and its pods run
    quiet(page)
    h100_nodes_cordoned(False)
    for _ in range(6):
        living.cycle()
        if Workload.objects.get(name="eval-8").state == "running":
            break
    page.goto(mine)
    ran = Workload.objects.get(name="eval-8")
    assert ran.state == "running", (ran.state, ran.pending_reason, ran.pending_detail)
    assert page.get_by_text(re.compile("^Running since")).is_visible()
    page.locator("#timeline-chart .main-svg").first.wait_for()
    shoot(page, screenshots, "member-workload-running")
    assert problems == []


def test_a_preempted_user_finds_who_preempted_them_and_why(
    world: Any, live_server: Any, browser: Any, screenshots: Path
) -> None:
    page, problems = open_page(browser)
    log_in(page, live_server.url, "recsys-member", world.password("recsys-member"))
    page.get_by_role("link", name="recsys/recsys-sweep").click()
    page.wait_for_url(re.compile(r".*/workloads/recsys/recsys-sweep/$"))
    preempted = page.locator("section", has=page.get_by_role("heading", name="Who preempted it"))
    text = preempted.inner_text()
    assert "reclaim (the lending queue wanted its quota back)" in text
    assert "queue search" in text and "2.5 GPU-h" in text
    assert "ranker" not in text  # another team's workload is named to admins only
    shoot(page, screenshots, "member-preempted-workload")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Preemptions").click()
    page.locator("#history-chart .main-svg").first.wait_for()
    assert page.get_by_text("recsys/recsys-sweep").first.is_visible()
    assert problems == []
