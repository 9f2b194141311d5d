"""Cancellation and confirmation in the loop (scripted model, in-process runner,
fakeredis store): what is stored, what is dispatched, what is left waiting."""

from __future__ import annotations

import asyncio
from typing import Any

import fakeredis
from google.genai import types

from tests.support import InProcessRunner
from tests.unit.test_loop import add
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop.invocation import EndReason, Invocation, InvocationEnded, Update
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.models.protocol import ModelRequest
from toolfleet.orchestrator.sessions.cancels import CancelBoard, Cancellation
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.cancellation import CancelRequest
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.tools import FunctionTool, LongRunningFunctionTool

S1 = session_key("app", "u1", "s1")


def open_case(name: str) -> dict[str, str]:
    """Opens a case someone completes later."""
    return {"status": "pending", "case": name}


def pay(amount: int) -> dict[str, int]:
    """Pays."""
    return {"paid": amount}


def over_100(amount: int, tool_context: ToolContext) -> bool:
    return amount > 100 and tool_context.agent_name == "tester"


PAY = FunctionTool(pay, require_confirmation=True)
PAY_LARGE = FunctionTool(pay, name="pay_large", require_confirmation=over_100)
CASE = LongRunningFunctionTool(open_case)


class HangingModel:
    """A model that never answers (a slow model call) until cancelled."""

    name = "hanging"

    def __init__(self) -> None:
        self.asked = asyncio.Event()

    async def generate(self, request: ModelRequest) -> types.Content:
        self.asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def start(
    store: SessionStore,
    agent: Agent,
    model: Any,
    cancellation: Cancellation | None = None,
    tickets: Completions | None = None,
) -> tuple[Invocation, InProcessRunner]:
    session = await store.get_or_create("app", "u1", "s1")
    runner = InProcessRunner(tickets=tickets)
    inv = Invocation(agent, lambda _: model, session, store, runner, Settings(), Keys("t"))
    inv.cancellation = cancellation
    return inv, runner


async def collect(inv: Invocation) -> list[Update]:
    content = types.Content(role="user", parts=[types.Part(text="go")])
    return [u async for u in run_invocation(inv, content)]


def ended(updates: list[Update]) -> EndReason:
    last = updates[-1]
    assert isinstance(last, InvocationEnded)
    return last.reason


async def test_a_cancel_during_the_model_call_stores_nothing_of_it(store: SessionStore) -> None:
    model = HangingModel()
    cancellation = Cancellation()
    inv, _ = await start(store, Agent(name="tester", model=model), model, cancellation)
    running = asyncio.create_task(collect(inv))
    await asyncio.wait_for(model.asked.wait(), 5)
    cancellation.set(keep_tickets=False)
    updates = await asyncio.wait_for(running, 5)

    assert ended(updates) is EndReason.CANCELLED
    session = await store.get(inv.session.key)
    assert [e.author for e in session.events] == ["user", "tester"]
    assert session.events[-1].error is not None and "cancelled" in session.events[-1].error
    assert session.open_turn() is None


async def test_a_cancelled_turn_is_stored_closed_and_the_model_is_not_asked_again(
    store: SessionStore,
) -> None:
    cancellation = Cancellation()

    def cancel_now(**_: Any) -> None:  # the cancellation comes while the turn runs
        cancellation.set(keep_tickets=False)

    model = ScriptedModel([call(Call("add", {"a": 1, "b": 2}), Call("open_case", {"name": "x"}))])
    agent = Agent(name="tester", tools=[add, CASE], model=model, before_tool_callback=cancel_now)
    inv, runner = await start(store, agent, model, cancellation)
    updates = await collect(inv)

    assert ended(updates) is EndReason.CANCELLED
    assert len(model.requests) == 1
    (responses,) = [e for e in updates if isinstance(e, Event) and e.calls]
    added, case = (p.function_response.response for p in responses.content.parts)  # type: ignore[union-attr]
    assert added == {"result": 3}  # finished: its result stands
    assert case is not None and case["error_type"] == "Cancelled"  # its ticket is closed
    assert await store.pending_calls(inv.session.key) == []
    assert runner.stopped == [responses.calls[1].call_id]


async def test_a_cancelled_turn_keeps_its_ticket_when_asked(
    store: SessionStore, fake_server: fakeredis.FakeServer
) -> None:
    cancellation = Cancellation()
    model = ScriptedModel([call(Call("open_case", {"name": "x"}))])
    agent = Agent(
        name="tester",
        tools=[CASE],
        model=model,
        before_tool_callback=lambda **_: cancellation.set(keep_tickets=True),
    )
    tickets = Completions(fakeredis.FakeRedis(server=fake_server), Keys("t"))
    inv, _ = await start(store, agent, model, cancellation, tickets)
    updates = await collect(inv)
    assert ended(updates) is EndReason.CANCELLED
    (ticket,) = await store.pending_calls(inv.session.key)
    assert ticket.tool == "open_case"


def test_the_board_cancels_only_the_sessions_running_here() -> None:
    board = CancelBoard()
    with board.watch(S1) as cancellation:
        for app, user, session_id in (("app", "u1", "s2"), ("app", "u2", "s1")):
            other = CancelRequest(app_name=app, user_id=user, session_id=session_id, at=0)
            assert not board.cancel(other)  # another session, or another user's "s1"
        assert not board.requested(S1)
        assert board.cancel(
            CancelRequest(app_name="app", user_id="u1", session_id="s1", keep_tickets=True, at=0)
        )
        assert cancellation.requested and cancellation.keep_tickets
        assert board.requested(S1)
    assert not board.requested(S1)  # the invocation ended


async def test_a_call_that_needs_confirmation_is_parked_undispatched_beside_its_sibling(
    store: SessionStore,
) -> None:
    model = ScriptedModel(
        [call(Call("pay", {"amount": 5}), Call("add", {"a": 1, "b": 1})), say("done")]
    )
    agent = Agent(name="tester", tools=[PAY, add], model=model)
    inv, runner = await start(store, agent, model)
    updates = await collect(inv)

    assert ended(updates) is EndReason.AWAITING_CONFIRMATION
    (batch,) = runner.batches  # only the sibling was sent
    (request,) = await store.pending_calls(inv.session.key)
    assert request.kind == "confirmation" and request.tool == "pay"
    assert batch != [request.call_id] and len(batch) == 1
    (asked,) = [e for e in updates if isinstance(e, Event) and e.confirmation_requests]
    assert asked.confirmation_requests[0]["args"] == {"amount": 5}
    session = await store.get(inv.session.key)
    assert session.open_turn() is None  # parked, not open
    assert len(model.requests) == 1  # the model waits for every response of the turn


async def test_a_check_decides_which_calls_need_a_confirmation(store: SessionStore) -> None:
    model = ScriptedModel(
        [call(Call("pay_large", {"amount": 50}), Call("pay_large", {"amount": 500})), say("ok")]
    )
    agent = Agent(name="tester", tools=[PAY_LARGE], model=model)
    inv, runner = await start(store, agent, model)
    await collect(inv)
    (request,) = await store.pending_calls(inv.session.key)
    assert len(runner.batches[0]) == 1 and request.call_id not in runner.batches[0]
