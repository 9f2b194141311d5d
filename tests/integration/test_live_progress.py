"""`toolfleet run`'s live progress during a long turn, on real workers: calls done out of
total, and the calls still running with the worker processes running them."""

from __future__ import annotations

import io
import re
import uuid

import pytest

from tests.integration import fleet_tools
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.console import ConsolePrinter
from toolfleet.orchestrator.cli.conversation import converse
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.shared.config import Settings

pytestmark = pytest.mark.integration

NAPS = 6  # on the default pool's 4 slots: two waves, about 3 s


async def test_a_long_turn_shows_done_of_total_and_who_runs_the_rest(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    naps = [Call("nap", {"seconds": 1.5, "label": f"n{i}"}) for i in range(NAPS)]
    model = ScriptedModel([call(*naps), say("rested")])
    agent = Agent(name="napper", tools=[fleet_tools.nap], model=model)
    out = io.StringIO()
    settled = await converse(
        agent,
        settings,
        ConsolePrinter(out),
        user_id="u1",
        session_id=uuid.uuid4().hex,
        message="nap",
        wait_s=None,
        progress_every_s=0.25,
    )
    assert settled
    lines = [line for line in out.getvalue().splitlines() if "calls done" in line]
    assert lines, out.getvalue()  # the turn outlasted the quiet period (2 s)
    counted = [re.search(rf"(\d)/{NAPS} calls done, (\d+) s", line) for line in lines]
    assert all(counted), lines
    done = [int(m.group(1)) for m in counted if m]
    assert done == sorted(done) and max(done) < NAPS  # only while calls were out
    hosts = {w.hostname for w in fleet.workers if "default" in w.pools}
    running = [line for line in lines if "running: nap on " in line]
    assert running, lines
    assert any(host in line for line in running for host in hosts)
    assert re.search(r"nap on \S+@\S+ pid \d+ \d+ s", running[-1])
    assert out.getvalue().rstrip().endswith("[napper] rested")
