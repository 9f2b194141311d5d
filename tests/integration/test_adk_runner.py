"""ADK's client side on real workers: toolfleet.adk's Runner and session services,
completing a long-running call by a FunctionResponse message, and a ported example."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
from google.genai import types

from examples import documents, reimbursement
from tests.integration import adk_tools
from toolfleet.adk import (
    App,
    BasePlugin,
    CallbackContext,
    Event,
    EventActions,
    InMemoryRunner,
    LlmCallsLimitExceededError,
    LlmRequest,
    NotPortedError,
    RedisSessionService,
    RunConfig,
    Runner,
)
from toolfleet.orchestrator.adk import sessions as adk_sessions
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli import main as cli
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.httpapi.callers import Caller
from toolfleet.orchestrator.loop import runner as fleet_runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, ScriptView, call, say
from toolfleet.orchestrator.models.protocol import Model
from toolfleet.orchestrator.replica import Replica
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import AlreadyCompletedError, CallNotPendingError, SessionBusyError
from toolfleet.shared.keys import Keys

pytestmark = pytest.mark.integration

APPROVAL = {"purpose": "meals", "amount": 250}
MODEL = ScriptedModel(
    [
        call(Call("ask_for_approval", APPROVAL)),
        say("I asked for approval."),
        lambda v: say(f"Update: {v.response('ask_for_approval')['status']}."),
        call(Call("reimburse", APPROVAL)),
        lambda v: say(f"Paid {v.response('reimburse')['paid']}."),
    ]
)


def texts(events: list[Event]) -> list[str]:
    return ["".join(p.text or "" for p in e.content.parts or ()) for e in events if e.content]


def reply(original: types.FunctionResponse, /, **update: Any) -> types.Content:
    part = types.Part(function_response=original.model_copy(update=update))
    return types.Content(role="user", parts=[part])


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> None:
    def choose(agent: Agent, settings: Settings) -> Model:
        return MODEL

    monkeypatch.setattr(fleet_runner, "choose_model", choose)


async def test_adks_runner_pauses_on_a_long_running_call_and_a_message_completes_it(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str], scripted: None
) -> None:
    service = RedisSessionService(settings)
    session = await service.create_session(
        app_name="expenses", user_id="u1", state={"team": "infra"}
    )
    stored = await service.get_session(app_name="expenses", user_id="u1", session_id=session.id)
    assert stored is not None and stored.state["team"] == "infra"
    assert await service.get_session(app_name="other", user_id="u1", session_id=session.id) is None
    runner = Runner(agent=reimbursement.agent, app_name="expenses", session_service=service)
    ask = types.Content(role="user", parts=[types.Part(text="Please reimburse 250$ for meals")])

    first = [
        e async for e in runner.run_async(user_id="u1", session_id=session.id, new_message=ask)
    ]
    (turn,) = [e for e in first if e.get_function_calls()]
    (pending_call,) = turn.get_function_calls()
    assert turn.long_running_tool_ids == {pending_call.id} and turn.is_final_response()
    (initial,) = [r for e in first for r in e.get_function_responses()]
    assert initial.id == pending_call.id and initial.response["status"] == "pending"
    assert texts(first)[-1] == "I asked for approval." and first[-1].is_final_response()
    assert all(e.author == "reimbursement_agent" and e.invocation_id for e in first)

    # Another user's session of the same id is his own: u1's call is not pending there,
    # and a response to it sent there completes nothing (as for a call that never was).
    await service.create_session(app_name="expenses", user_id="u2", session_id=session.id)
    forged = reply(initial, response={"status": "approved"})
    with pytest.raises(CallNotPendingError, match="no pending call with id"):
        async for _ in runner.run_async(user_id="u2", session_id=session.id, new_message=forged):
            pass

    # An intermediate response reaches the model, as in ADK; the call stays pending.
    update = reply(initial, response={"status": "reviewing"}, will_continue=True)
    second = [
        e async for e in runner.run_async(user_id="u1", session_id=session.id, new_message=update)
    ]
    assert texts(second) == ["Update: reviewing."]

    # The final one, through the sync generator: applied once, the agent goes on.
    final = reply(initial, response={"status": "approved"})
    third = await asyncio.to_thread(
        lambda: list(runner.run(user_id="u1", session_id=session.id, new_message=final))
    )
    assert [c.name for e in third for c in e.get_function_calls()] == ["reimburse"]
    assert texts(third)[-1] == "Paid $250.00 for meals." and third[-1].is_final_response()
    with pytest.raises(AlreadyCompletedError):
        async for _ in runner.run_async(user_id="u1", session_id=session.id, new_message=final):
            pass

    ended = await service.get_session(app_name="expenses", user_id="u1", session_id=session.id)
    assert ended is not None and ended.app_name == "expenses"
    with pytest.raises(ValueError, match="Session not found"):
        async for _ in runner.run_async(user_id="u3", session_id=session.id, new_message=ask):
            pass


class Seen(BasePlugin):
    """An app's plugin: notes the model calls and tool results it sees."""

    def __init__(self) -> None:
        super().__init__(name="seen")
        self.model_calls = 0
        self.tools: list[str] = []

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> None:
        self.model_calls += 1

    async def after_tool_callback(
        self, *, tool: Any, tool_args: dict[str, Any], tool_context: Any, result: dict[str, Any]
    ) -> None:
        self.tools.append(tool.name)


async def test_an_apps_runner_runs_its_plugins_limits_model_calls_and_debugs(
    settings: Settings,
    fleet: WorkerGroup,
    orchestrator_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model = ScriptedModel(
        [
            call(Call("reimburse", {"purpose": "taxi", "amount": 20})),
            lambda v: say(f"Paid {v.response('reimburse')['paid']}."),
        ]
    )
    monkeypatch.setattr(fleet_runner, "choose_model", lambda agent, settings: model)
    seen = Seen()
    service = RedisSessionService(settings)
    app = App(name="expenses", root_agent=reimbursement.agent, plugins=[seen])
    runner = Runner(app=app, session_service=service, auto_create_session=True)
    ask = types.UserContent("Please reimburse my taxi")

    # A session no one created: made on first run (auto_create_session).
    events = [e async for e in runner.run_async(user_id="u1", session_id="new", new_message=ask)]
    assert texts(events)[-1] == "Paid $20.00 for taxi." and events[-1].is_final_response()
    (record,) = [c for e in events for c in e.calls]
    assert record.worker not in ("", "orchestrator")  # a worker ran it
    assert (seen.model_calls, seen.tools) == (2, ["reimburse"])
    assert all(e.partial is None and e.turn_complete is None for e in events)

    # One model call allowed: the run's second raises, as ADK's, and is never made.
    limited = RunConfig(max_llm_calls=1)
    with pytest.raises(LlmCallsLimitExceededError, match="limit of `1` exceeded"):
        async for _ in runner.run_async(
            user_id="u1", session_id="new", new_message=ask, run_config=limited
        ):
            pass
    assert len(model.requests) == 3

    debugged = await runner.run_debug("Please reimburse my taxi", verbose=True)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("reimbursement_agent > [Calling tool: reimburse(")
    assert printed[-1] == "reimbursement_agent > Paid $20.00 for taxi."
    assert texts(debugged)[-1] == "Paid $20.00 for taxi."
    assert await service.get_session(
        app_name="expenses", user_id="debug_user_id", session_id="debug_session_id"
    )
    await runner.close()


def test_asyncio_run_creates_a_session_and_events_carry_adks_deltas(
    settings: Settings, fleet: WorkerGroup, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel(
        [call(Call("save_document", {"document_name": "notes.txt", "text": "hi"})), say("Saved.")]
    )
    monkeypatch.setattr(fleet_runner, "choose_model", lambda agent, settings: model)
    service = RedisSessionService(settings)
    # As ADK's docs write it, outside any event loop.
    session = asyncio.run(
        service.create_session(app_name="docs", user_id="u1", state={"topic": "notes"})
    )
    runner = Runner(agent=documents.agent, app_name="docs", session_service=service)
    message = types.UserContent("Save my notes")
    events = list(runner.run(user_id="u1", session_id=session.id, new_message=message))
    (saved,) = [e for e in events if e.get_function_responses()]
    assert saved.actions.artifact_delta == {"notes.txt": 0}
    stored = asyncio.run(service.get_session(app_name="docs", user_id="u1", session_id=session.id))
    assert stored is not None
    assert stored.events[0].actions.state_delta == {"topic": "notes"}
    assert [e.actions.artifact_delta for e in stored.events if e.get_function_responses()] == [
        {"notes.txt": 0}
    ]

    # ADK's way to write state from the client: an event whose actions carry it.
    write = Event(
        invocation_id="",
        author="system",
        actions=EventActions(state_delta={"user:tier": "gold", "temp:draft": 1}),
    )
    asyncio.run(service.append_event(stored, write))
    assert stored.state["user:tier"] == "gold" and stored.state["temp:draft"] == 1
    asyncio.run(service.append_event(stored, write.model_copy(update={"partial": True})))
    again = asyncio.run(service.get_session(app_name="docs", user_id="u1", session_id=session.id))
    assert again is not None and again.state["user:tier"] == "gold"
    assert "temp:draft" not in again.state  # temp: lives in memory only
    assert again.events[-1].actions.state_delta == {"user:tier": "gold"}
    assert len(again.events) == len(stored.events)  # the partial one was not stored


async def test_append_event_waits_for_the_running_invocations_lease(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = RedisSessionService(settings)
    session = await service.create_session(app_name="docs", user_id="u1")
    write = Event(invocation_id="", author="system", state_delta={"seen": True})
    async with Replica(settings) as other, other.leases.hold(session.key):
        # Another replica runs the session: the append waits, then says so.
        monkeypatch.setattr(adk_sessions, "APPEND_WAIT_S", 0.2)
        with pytest.raises(SessionBusyError):
            await service.append_event(session, write)
        monkeypatch.setattr(adk_sessions, "APPEND_WAIT_S", 10.0)
        waiting = asyncio.create_task(service.append_event(session, write))
        done, _ = await asyncio.wait({waiting}, timeout=0.3)
        assert not done  # still held: nothing written meanwhile
    await asyncio.wait_for(waiting, timeout=10)  # stored once the lease is released
    stored = await service.get_session(app_name="docs", user_id="u1", session_id=session.id)
    assert stored is not None and stored.state["seen"] is True


async def test_in_memory_runner_runs_on_the_fleet_toolfleet_redis_url_names(
    settings: Settings,
    fleet: WorkerGroup,
    orchestrator_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = ScriptedModel(
        [
            call(Call("reimburse", {"purpose": "taxi", "amount": 20})),
            lambda v: say(f"Paid {v.response('reimburse')['paid']}."),
        ]
    )
    monkeypatch.setattr(fleet_runner, "choose_model", lambda agent, settings: model)
    monkeypatch.setattr(adk_sessions, "_shared_fleet", None)  # read the env afresh
    runner = InMemoryRunner(agent=reimbursement.agent)
    events = await runner.run_debug(["Please reimburse my taxi"], quiet=True)
    assert texts(events)[-1] == "Paid $20.00 for taxi."
    (record,) = [c for e in events for c in e.calls]
    assert record.worker not in ("", "orchestrator")
    service = RedisSessionService(settings)
    stored = await service.get_session(
        app_name="InMemoryRunner", user_id="debug_user_id", session_id="debug_session_id"
    )
    assert stored is not None and len(stored.events) == len(events) + 1  # and the user's


def remembered(view: ScriptView) -> str:
    found = view.response("load_memory")["memories"]
    return "; ".join(f"{m['author']}: {m['content']['parts'][0]['text']}" for m in found)


DESK_MODEL = ScriptedModel(
    by_message={
        "my favourite colour is": [say("Noted.")],
        "which colour": [
            call(Call("load_memory", {"query": "favourite colour"})),
            lambda v: say(f"I remember: {remembered(v)}"),
        ],
        "which plan": [
            call(Call("get_user_choice", {"options": ["basic", "pro"]})),
            lambda v: say(f"You chose {v.response('get_user_choice')['choice']}."),
        ],
    }
)


@pytest.fixture
def desk(monkeypatch: pytest.MonkeyPatch) -> None:
    def choose(agent: Agent, settings: Settings) -> Model:
        return DESK_MODEL

    monkeypatch.setattr(fleet_runner, "choose_model", choose)


async def test_load_memory_and_get_user_choices_ticket_run_on_the_fleet(
    settings: Settings,
    fleet: WorkerGroup,
    orchestrator_env: dict[str, str],
    desk: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    service = RedisSessionService(settings)
    runner = Runner(agent=adk_tools.adk_choice_desk, app_name="desk", session_service=service)

    async def say_to(user: str, message: types.Content) -> list[Event]:
        session_id = f"{user}-now"
        if await service.get_session(app_name="desk", user_id=user, session_id=session_id) is None:
            await service.create_session(app_name="desk", user_id=user, session_id=session_id)
        return [
            e
            async for e in runner.run_async(
                user_id=user, session_id=session_id, new_message=message
            )
        ]

    def text(value: str) -> types.Content:
        return types.Content(role="user", parts=[types.Part(text=value)])

    # What u1 said in one session, a worker's load_memory finds from another; u2's is not u1's.
    await runner.run_debug("My favourite colour is teal", user_id="u1", session_id="u1-old")
    await runner.run_debug("My favourite colour is red", user_id="u2", session_id="u2-old")
    recalled = await say_to("u1", text("Which colour do I like?"))
    memory = texts(recalled)[-1]
    assert "user: My favourite colour is teal" in memory and "red" not in memory

    # get_user_choice answers pending: a ticket waits for the user's choice.
    asked = await say_to("u1", text("Which plan should I take?"))
    (turn,) = [e for e in asked if e.get_function_calls()]
    (choice,) = turn.get_function_calls()
    assert choice.name == "get_user_choice" and turn.long_running_tool_ids == {choice.id}
    (pending,) = [r for e in asked for r in e.get_function_responses()]
    assert pending.id == choice.id and pending.response == {"result": None}
    capsys.readouterr()
    assert await asyncio.to_thread(cli.main, ["tickets", "show", str(choice.id)]) == 0
    assert "get_user_choice" in capsys.readouterr().out
    # Its ticket is the user's to answer (over HTTP too, not only a service's).
    client = redis.Redis.from_url(settings.require_redis_url())
    try:
        ticket = Completions.of(client, Keys(settings.key_prefix), settings).get(str(choice.id))
    finally:
        client.close()
    assert ticket.answered_by_user and Caller.of("u1", []).may_post_result(ticket)

    # The user's choice is posted as the call's final result; the agent goes on with it.
    chosen = await say_to("u1", reply(pending, response={"choice": "pro"}))
    assert texts(chosen)[-1] == "You chose pro."
    with pytest.raises(AlreadyCompletedError):
        await say_to("u1", reply(pending, response={"choice": "basic"}))


async def test_an_event_in_adks_view_is_appended_as_its_state_writes(settings: Settings) -> None:
    """ADK's EventActions, its flags None and its request maps empty, stored back."""
    service = RedisSessionService(settings)
    user = "appender"  # a user of its own: user: state is shared by a user's sessions
    session = await service.create_session(app_name="docs", user_id=user)
    note = Event(
        invocation_id="i1", author="user", actions=EventActions(state_delta={"topic": "notes"})
    )
    assert note.actions.escalate is None
    await service.append_event(session, note)
    stored = await service.get_session(app_name="docs", user_id=user, session_id=session.id)
    assert stored is not None and stored.state["topic"] == "notes"
    (seen,) = stored.events
    assert seen.actions.escalate is None and seen.actions.state_delta == {"topic": "notes"}
    again = seen.model_copy(update={"id": "e2", "actions": EventActions(state_delta={"n": 2})})
    await service.append_event(stored, again)
    assert stored.state == {"topic": "notes", "n": 2}


async def test_callbacks_see_the_session_as_stored_and_as_they_wrote_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A callback's writes are in its context's session at once, and in the stored
    session once the event carrying them is: ADK's order, read through ADK's private
    invocation context as ADK's own samples do. State-only events are yielded."""
    monkeypatch.setattr(
        fleet_runner, "choose_model", lambda agent, settings: ScriptedModel([say("Hi.")])
    )
    seen: dict[str, tuple[list[str], list[str], str | None]] = {}

    async def note(context: CallbackContext, hook: str) -> None:
        context.state[hook] = True
        inner = context._invocation_context
        session = inner.session
        stored = await inner.session_service.get_session(
            app_name=session.app_name, user_id=session.user_id, session_id=session.id
        )
        text = context.user_content.parts[0].text if context.user_content else None
        seen[hook] = (sorted(session.state), sorted(stored.state), text)

    async def before_agent(callback_context: CallbackContext) -> None:
        await note(callback_context, "before_agent")

    async def before_model(callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        await note(callback_context, "before_model")

    async def after_agent(callback_context: CallbackContext) -> None:
        await note(callback_context, "after_agent")

    agent = Agent(
        name="noter",
        before_agent_callback=before_agent,
        before_model_callback=before_model,
        after_agent_callback=after_agent,
    )
    service = RedisSessionService(settings)
    runner = Runner(agent=agent, app_name="notes", session_service=service)
    session = await service.create_session(app_name="notes", user_id="u1")
    message = types.UserContent("Take a note")
    events = [
        e async for e in runner.run_async(user_id="u1", session_id=session.id, new_message=message)
    ]
    assert seen == {
        "before_agent": (["before_agent"], [], "Take a note"),
        "before_model": (["before_agent", "before_model"], ["before_agent"], "Take a note"),
        "after_agent": (
            ["after_agent", "before_agent", "before_model"],
            ["before_agent", "before_model"],
            "Take a note",
        ),
    }
    assert [(e.content is None, sorted(e.actions.state_delta)) for e in events] == [
        (True, ["before_agent"]),
        (False, ["before_model"]),
        (True, ["after_agent"]),
    ]


async def test_run_async_takes_adks_state_delta_and_yields_the_message_when_asked(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel([say("Noted.")])
    monkeypatch.setattr(fleet_runner, "choose_model", lambda agent, settings: model)
    service = RedisSessionService(settings)
    agent = Agent(name="mood_agent", instruction="The user feels {mood}.")
    runner = Runner(agent=agent, app_name="moods", session_service=service)
    session = await service.create_session(app_name="moods", user_id="u1")
    message = types.UserContent("How am I?")
    events = [
        e
        async for e in runner.run_async(
            user_id="u1",
            session_id=session.id,
            new_message=message,
            state_delta={"mood": "happy"},
            yield_user_message=True,
        )
    ]
    assert [e.author for e in events] == ["user", "mood_agent"]
    assert events[0].actions.state_delta == {"mood": "happy"}
    assert texts(events) == ["How am I?", "Noted."]
    (request,) = model.requests  # written before the agent ran: its instruction has it
    assert "The user feels happy." in request.instruction
    stored = await service.get_session(app_name="moods", user_id="u1", session_id=session.id)
    assert stored is not None and stored.state["mood"] == "happy"

    async def run(**kwargs: Any) -> None:
        async for _ in runner.run_async(user_id="u1", session_id=session.id, **kwargs):
            pass

    with pytest.raises(NotPortedError, match="invocation_id"):
        await run(invocation_id="e-1", new_message=message)
    with pytest.raises(NotPortedError, match="toolfleet cancel"):
        await run(new_message=message, abort_signal=asyncio.Event())
    with pytest.raises(ValueError, match="No parts in the new_message"):
        await run()
