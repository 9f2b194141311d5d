"""A turn's responses held back for the invocation's next write (loop/held.py)."""

from __future__ import annotations

from typing import Any

import pytest
from google.genai import types

from tests.support import InProcessRunner
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.loop import held
from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.sessions import fencing
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.messages import CallStatus, ToolActions, ToolResult
from toolfleet.shared.tools import FunctionTool, LongRunningFunctionTool

S1 = session_key("app", "u1", "s1")


def add(a: int, b: int) -> int:
    """Adds.

    Args:
        a: First.
        b: Second.
    """
    return a + b


def open_ticket() -> dict[str, str]:
    """Opens a ticket."""
    return {"status": "pending"}


TOOLS = {"add": FunctionTool(add), "open_ticket": LongRunningFunctionTool(open_ticket)}


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The events each write stores, by author (writes without an RPUSH left out)."""
    stored: list[list[str]] = []
    original, once = WriteBatch.run, fencing.apply_once

    def record(batch: WriteBatch) -> None:
        pushed = [Event.model_validate_json(c[2]).author for c in batch.commands if c[0] == "RPUSH"]
        if pushed:
            stored.append(pushed)

    async def recording(self: WriteBatch, client: Any) -> list[Any]:
        record(self)
        return await original(self, client)

    async def recording_once(client: Any, batch: WriteBatch, prefix: str) -> list[Any]:
        record(batch)  # a write without a fence, applied once
        return await once(client, batch, prefix)

    monkeypatch.setattr(WriteBatch, "run", recording)
    monkeypatch.setattr(fencing, "apply_once", recording_once)
    return stored


async def invoke(store: SessionStore, *steps: Any) -> tuple[Invocation, ScriptedModel]:
    model = ScriptedModel(list(steps))
    agent = Agent(name="adder", tools=[add], model=model)
    session = await store.get_or_create("app", "u1", "s1")
    inv = Invocation(
        agent, lambda _: model, session, store, InProcessRunner(), Settings(), Keys("t")
    )
    user = types.Content(role="user", parts=[types.Part(text="go")])
    async for _ in run_invocation(inv, user):
        pass
    return inv, model


def authors_and_parts(events: list[Event]) -> list[tuple[str, str]]:
    kinds = []
    for event in events:
        for part in event.content.parts or () if event.content else ():
            kind = (
                "call" if part.function_call else "response" if part.function_response else "text"
            )
            kinds.append((event.author, kind))
    return kinds


async def test_workers_results_are_stored_with_the_answer_in_one_write(
    store: SessionStore, writes: list[list[str]]
) -> None:
    """Given a turn whose results are all workers' final results, when the model answers,
    then the responses were given to it from memory and stored in the answer's write."""
    inv, model = await invoke(store, call(Call("add", {"a": 1, "b": 2})), say("3"))

    assert writes == [["user"], ["adder"], ["adder", "adder"]]  # responses, then answer
    responses = model.requests[1].contents[-1].parts or []
    assert [p.function_response.response for p in responses if p.function_response] == [
        {"result": 3}
    ]
    stored = (await SessionStore(store._redis, Keys("t")).get(S1)).events
    assert authors_and_parts(stored) == [
        ("user", "text"), ("adder", "call"), ("adder", "response"), ("adder", "text"),
    ]  # fmt: skip
    assert inv.held is None and not inv.held_in_doubt


async def test_each_steps_responses_ride_on_the_next_model_turn(
    store: SessionStore, writes: list[list[str]]
) -> None:
    _, model = await invoke(
        store, call(Call("add", {"a": 1, "b": 2})), call(Call("add", {"a": 3, "b": 4})), say("7")
    )
    # The model turn of step 2 carries step 1's responses; the answer carries step 2's.
    assert writes == [["user"], ["adder"], ["adder", "adder"], ["adder", "adder"]]
    stored = (await SessionStore(store._redis, Keys("t")).get(S1)).events
    assert [k for _, k in authors_and_parts(stored)] == [
        "text", "call", "response", "call", "response", "text"
    ]  # fmt: skip
    assert len(model.requests) == 3


async def test_answers_the_orchestrator_makes_are_stored_at_once(
    store: SessionStore, writes: list[list[str]]
) -> None:
    """An unknown tool's error is the orchestrator's answer (it closes the call): the
    responses get a write of their own before the model is asked again."""
    await invoke(store, call(Call("nope"), Call("add", {"a": 1, "b": 1})), say("ok"))
    assert writes == [["user"], ["adder"], ["adder"], ["adder"]]


def result(call_id: str, tool: str = "add", **fields: Any) -> ToolResult:
    values: dict[str, Any] = dict(
        call_id=call_id, tool=tool, session_id="s1", invocation_id="inv-1",
        status=CallStatus.SUCCESS,
        response={"result": 1}, worker="w1",
    )  # fmt: skip
    values.update(fields)
    return ToolResult(**values)


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (result("c1", worker="orchestrator"), "the orchestrator's own answer (a timeout)"),
        (result("c1", status=CallStatus.PENDING), "a pending ticket"),
        (result("c1", tool="open_ticket"), "a long-running tool's (closed by its completion)"),
        (result("c1", tool="gone"), "a tool the turn was not offered"),
        (result("c2"), "a call this turn did not send (a duplicate's copy)"),
        (result("c1", actions=ToolActions(requested_auth={"k": 1})), "a credential request"),
        (result("c1", actions=ToolActions(transfer_to_agent="x")), "an action"),
        (result("c1", actions=ToolActions(skip_summarization=True)), "an action"),
    ],
)
def test_only_workers_final_results_of_sent_calls_are_held(answer: ToolResult, why: str) -> None:
    assert held.holdable([result("c1")], {"c1"}, TOOLS), "a worker's final result"
    assert not held.holdable([result("c1"), answer], {"c1"}, TOOLS), why
    assert not held.holdable([], set(), TOOLS), "nothing to hold"


class BrokenStore(SessionStore):
    """Every append fails as a connection that breaks after sending would."""

    async def append(self, *args: Any, **kwargs: Any) -> None:
        self.appends = getattr(self, "appends", 0) + 1
        raise ConnectionError("the connection broke after the write was sent")


async def test_a_failed_write_leaves_what_it_carried_in_doubt_and_never_sends_it_again(
    store: SessionStore,
) -> None:
    """Given responses held for the next write, when that write fails (it may have landed),
    then they are not written again by this invocation, and the session is unsettled: it
    stays owed, for whoever resumes it to read what Redis has."""
    broken = BrokenStore(store._redis, Keys("t"))
    session = await broken.get_or_create("app", "u1", "s1")
    model = ScriptedModel([say("x")])
    agent = Agent(name="adder", tools=[add], model=model)
    inv = Invocation(
        agent, lambda _: model, session, broken, InProcessRunner(), Settings(), Keys("t")
    )
    event = Event(invocation_id=inv.id, author="adder")
    inv.held = broken.hold(session, event)
    assert session.events == [event]  # given to the model from memory

    with pytest.raises(ConnectionError):
        await held.append(inv, Event(invocation_id=inv.id, author="adder"))
    assert inv.held is None and inv.held_in_doubt and held.unsettled(inv)
    await held.store_held(inv)  # nothing left to store: the failed write had it
    assert broken.appends == 1
