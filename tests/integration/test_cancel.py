"""Cancelling a session on real workers: a prefork call is terminated and an io
coroutine cancelled, each answered once with a Cancelled error in well under a second,
and the worker then takes the next call; tickets are closed or kept."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration import cancel_tools, fleet_tools
from tests.support import answers, assert_one_response_per_call, until
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup, WorkerProcess
from toolfleet.orchestrator.loop.invocation import EndReason, InvocationEnded, Update
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, Step, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.keys import session_key

pytestmark = pytest.mark.integration

WAIT_S = 30
TOOLS = [*tools_in_module(cancel_tools), *tools_in_module(fleet_tools)]


@pytest.fixture(scope="module")
def stoppable(fleet: WorkerGroup) -> WorkerProcess:
    """One prefork worker with a single child on the `stoppable` pool."""
    return fleet.start(["stoppable"], concurrency=1, name="stopper1")


async def collect(updates: AsyncIterator[Update]) -> list[Update]:
    return [u async for u in updates]


class Running:
    """An invocation running in the background on its own runner."""

    def __init__(self, settings: Settings, *steps: Step) -> None:
        agent = Agent(name="cancel_agent", tools=TOOLS, model=ScriptedModel(list(steps)))
        self.runner = Runner(agent, settings)
        self.session_id = uuid.uuid4().hex

    async def __aenter__(self) -> Running:
        await self.runner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.runner.__aexit__(None, None, None)

    def start(self) -> asyncio.Task[list[Update]]:
        updates = self.runner.run(user_id="u1", session_id=self.session_id, message="go")
        return asyncio.create_task(collect(updates))

    async def session(self) -> Session:
        return await self.runner.store.get(session_key("cancel_agent", "u1", self.session_id))


def left(marker: Path, what: str) -> bool:
    """Whether the tool left its `what` file (started, finished)."""
    return Path(f"{marker}.{what}").exists()


async def started(marker: Path) -> None:
    await until(lambda: left(marker, "started"), f"{marker} to start", WAIT_S)


async def test_cancelling_a_prefork_call_answers_it_at_once_and_the_worker_takes_the_next(
    settings: Settings, stoppable: WorkerProcess, tmp_path: Path
) -> None:
    slow, quick = tmp_path / "slow", tmp_path / "quick"
    async with Running(
        settings,
        call(Call("crunch", {"marker": str(slow), "seconds": 10})),
        say("never asked"),
    ) as running:
        task = running.start()
        await started(slow)
        cancelled_at = time.monotonic()
        await running.runner.cancel(user_id="u1", session_id=running.session_id)
        updates = await asyncio.wait_for(task, WAIT_S)
        answered_in = time.monotonic() - cancelled_at
        session = await running.session()

    assert answered_in < 1.0, answered_in
    ((_, response),) = answers(session)
    assert response["status"] == "error" and response["error_type"] == "Cancelled"
    assert isinstance(updates[-1], InvocationEnded)
    assert updates[-1].reason is EndReason.CANCELLED
    assert_one_response_per_call(session)

    # The worker (one child, killed with the call) takes the next call at once.
    async with Running(
        settings, call(Call("crunch", {"marker": str(quick), "seconds": 0})), say("done")
    ) as running:
        await asyncio.wait_for(running.start(), WAIT_S)
        after = await running.session()
    assert [r for _, r in answers(after)] == [{"crunched": 0}]
    assert not left(slow, "finished")  # one child: the first call was killed


async def test_cancelling_an_io_coroutine_cancels_it_and_keeps_a_sibling_result(
    settings: Settings, fleet: WorkerGroup, tmp_path: Path
) -> None:
    slow = tmp_path / "slow"
    async with Running(
        settings,
        call(
            Call("fetch_slowly", {"marker": str(slow), "seconds": 10}),
            Call("nap", {"seconds": 0, "label": "quick"}),
        ),
        say("never asked"),
    ) as running:
        task = running.start()
        await started(slow)
        cancelled_at = time.monotonic()
        await running.runner.cancel(user_id="u1", session_id=running.session_id)
        await asyncio.wait_for(task, WAIT_S)
        answered_in = time.monotonic() - cancelled_at
        session = await running.session()

    assert answered_in < 1.0, answered_in
    (_, fetched), (_, napped) = answers(session)
    assert fetched["error_type"] == "Cancelled"
    assert napped == {"slept": 0, "label": "quick"}  # it finished before the cancel
    assert_one_response_per_call(session)
    # The coroutine was cancelled on its worker (it logs so), not left to finish.
    io_worker = next(w for w in fleet.workers if "io" in w.pools)
    await until(lambda: "stopped cancelled call(s)" in io_worker.log(), "the stop", WAIT_S)
    assert not left(slow, "finished")

    # The io worker (one process, its loop shared by every coroutine) takes the next call.
    quick = tmp_path / "quick"
    async with Running(
        settings, call(Call("fetch_slowly", {"marker": str(quick), "seconds": 0})), say("done")
    ) as running:
        await asyncio.wait_for(running.start(), WAIT_S)
        after = await running.session()
    assert [r for _, r in answers(after)] == [{"fetched": 0}]


async def test_cancel_closes_the_sessions_pending_tickets_unless_kept(
    settings: Settings, fleet: WorkerGroup
) -> None:
    model = ScriptedModel([call(Call("open_case", {"name": "printer"})), say("opened")])
    agent = Agent(name="cancel_agent", tools=TOOLS, model=model)
    async with Orchestrator([agent], settings, models={"cancel_agent": model}) as orch:
        runner = orch.runner("cancel_agent")
        kept, closed = uuid.uuid4().hex, uuid.uuid4().hex
        # u2's session of the same id as u1's `closed`: another session, not cancelled.
        others = session_key("cancel_agent", "u2", closed)
        for user_id, session_id in (("u1", kept), ("u1", closed), ("u2", closed)):
            await runner.ask(user_id=user_id, session_id=session_id, message="open a case")
        kept_key, closed_key = (session_key("cancel_agent", "u1", s) for s in (kept, closed))
        (kept_ticket,) = await runner.store.pending_calls(kept_key)
        (closed_ticket,) = await runner.store.pending_calls(closed_key)
        (others_ticket,) = await runner.store.pending_calls(others)
        asked = len(model.requests)

        assert await runner.cancel(user_id="u1", session_id=kept, keep_tickets=True) == []
        closing = await runner.cancel(user_id="u1", session_id=closed)
        assert closing == [closed_ticket.call_id]
        assert await orch.wait_until_settled(closed_key, WAIT_S)

        assert await runner.store.pending_calls(kept_key) == [kept_ticket]
        assert await runner.store.pending_calls(others) == [others_ticket]
        session = await runner.store.get(closed_key)
        # The ticket's final response is a Cancelled error; the model is not asked again.
        assert answers(session)[-1] == (closed_ticket.call_id, answers(session)[-1][1])
        assert answers(session)[-1][1]["error_type"] == "Cancelled"
        assert len(model.requests) == asked
