"""ToolContext in full on real workers: state scopes, actions, agent tools, toolsets, artifacts."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import pytest
import redis

from examples import calculator, customer_support, documents, summarizer
from tests.integration import fleet_tools
from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.cli.local_workers import WorkerGroup
from toolfleet.orchestrator.loop.invocation import CallFinished, Update
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.orchestrator.sessions.events import Event, answer_of
from toolfleet.shared.config import Settings
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.keys import Keys, session_key

pytestmark = pytest.mark.integration

TOOLS = tools_in_module(fleet_tools)


async def run(
    settings: Settings, *steps: object, user: str = "u1", session: str | None = None
) -> tuple[list[Update], Runner]:
    agent = Agent(name="ctx_agent", tools=TOOLS, model=ScriptedModel(list(steps)))  # type: ignore[arg-type]
    async with Runner(agent, settings) as runner:
        updates = [
            u
            async for u in runner.run(
                user_id=user, session_id=session or uuid.uuid4().hex, message="go"
            )
        ]
    return updates, runner


def results(updates: list[Update]) -> list[dict[str, object]]:
    return [u.result.response for u in updates if isinstance(u, CallFinished)]


async def test_user_state_is_shared_by_the_users_sessions_only(
    settings: Settings, fleet: WorkerGroup
) -> None:
    key = f"user:color-{uuid.uuid4().hex[:6]}"
    await run(
        settings, call(Call("remember", {"key": key, "value": "teal"})), say("ok"), user="ann"
    )
    recall = [call(Call("recall", {"key": key})), say("ok")]
    same_user, _ = await run(settings, *recall, user="ann")
    other_user, _ = await run(settings, *recall, user="bob")
    assert results(same_user) == [{"value": "teal"}]
    assert results(other_user) == [{"value": None}]


async def test_temp_state_reaches_later_calls_of_the_invocation_but_is_never_stored(
    settings: Settings, fleet: WorkerGroup
) -> None:
    session_id = uuid.uuid4().hex
    updates, _ = await run(
        settings,
        call(Call("remember", {"key": "temp:draft", "value": "v1"})),
        call(Call("recall", {"key": "temp:draft"})),
        say("ok"),
        session=session_id,
    )
    assert results(updates) == [{"result": "stored"}, {"value": "v1"}]
    client = redis.Redis.from_url(settings.require_redis_url())
    keys = Keys(settings.key_prefix)
    key = session_key("ctx_agent", "u1", session_id)
    stored = [json.loads(raw) for raw in client.lrange(keys.events(key), 0, -1)]
    assert [e.get("state_delta") for e in stored if e.get("state_delta")] == []
    assert client.hgetall(keys.session_state(key)) == {}
    client.close()


async def test_parallel_writes_to_one_key_merge_in_call_order_every_time(
    settings: Settings, fleet: WorkerGroup
) -> None:
    for _ in range(3):
        session_id = uuid.uuid4().hex
        updates, _ = await run(
            settings,
            call(
                Call("remember_after", {"key": "winner", "value": "first", "delay_s": 0.3}),
                Call("remember_after", {"key": "winner", "value": "second", "delay_s": 0.0}),
            ),
            say("ok"),
            session=session_id,
        )
        arrivals = [u.result.state_delta["winner"] for u in updates if isinstance(u, CallFinished)]
        assert arrivals == ["second", "first"]  # the later call finished first
        (merged,) = [u for u in updates if isinstance(u, Event) and u.calls]
        assert merged.state_delta == {"winner": "second"}


@pytest.fixture
async def orchestrator(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> AsyncIterator[Orchestrator]:
    agents = [customer_support.main_agent, summarizer.root_agent, summarizer.presenting_agent]
    async with Orchestrator(agents, settings) as orch:
        yield orch


async def test_transfer_hands_this_and_later_messages_to_the_sub_agent(
    orchestrator: Orchestrator,
) -> None:
    runner = orchestrator.runner("main_agent")
    session_id = uuid.uuid4().hex
    first = [
        u async for u in runner.run(user_id="u1", session_id=session_id, message="This is urgent!")
    ]
    answers = [(u.author, answer_of(u)) for u in first if isinstance(u, Event) and answer_of(u)]
    assert answers[-1] == ("support_agent", "Support handler here: I'm on it - This is urgent!")
    second = [u async for u in runner.run(user_id="u1", session_id=session_id, message="Any news?")]
    authors = {u.author for u in second if isinstance(u, Event) and u.author != "user"}
    assert authors == {"support_agent"}


async def test_agent_tool_runs_on_the_agents_pool_and_skips_summarization(
    orchestrator: Orchestrator,
) -> None:
    text = "Qubits can be 0 and 1 at once. Entanglement links them. It is early days."
    skipping = orchestrator.runner("root_agent")
    updates = [
        u async for u in skipping.run(user_id="u1", session_id=uuid.uuid4().hex, message=text)
    ]
    (result,) = [u.result for u in updates if isinstance(u, CallFinished)]
    assert result.tool == "summary_agent" and result.worker.startswith("w5@")  # the agents pool
    summary = result.response["result"]
    assert summary == "Summary (15 words, 3 sentences): Qubits can be 0 and 1 at once."
    final = [answer_of(u) for u in updates if isinstance(u, Event) and answer_of(u)][-1]
    assert final == summary  # verbatim, no model call after the tool
    assert len(skipping.model_for(skipping.agent).requests) == 1  # type: ignore[attr-defined]

    # The inner agent's own tool call ran on the default pool, in a child session.
    child_id = f"{result.session_id}.{result.call_id}"  # its caller's app and user
    child = await skipping.store.get(session_key(skipping.app_name, "u1", child_id))
    (inner,) = [c for e in child.events for c in e.calls]
    assert inner.tool == "count_words" and inner.worker.split("@")[0] in {"w1", "w2"}

    presenting = orchestrator.runner("presenting_agent")
    await presenting.ask(user_id="u1", session_id=uuid.uuid4().hex, message=text)
    assert len(presenting.model_for(presenting.agent).requests) == 2  # type: ignore[attr-defined]


async def test_toolset_tools_are_prefixed_and_close_runs_once_at_shutdown(
    settings: Settings, fleet: WorkerGroup, orchestrator_env: dict[str, str]
) -> None:
    toolset = calculator.SimpleMathToolset(prefix="calculator_")
    model = ScriptedModel(calculator.agent.offline_script or [])
    agent = Agent(name="calc", tools=[calculator.greet_user, toolset], model=model)
    async with Orchestrator([agent], settings) as orch:
        answer = await orch.runner("calc").ask(
            user_id="u1", session_id=uuid.uuid4().hex, message="Add 5 and 3, subtract 2 from 10"
        )
        assert toolset.closed == 0
    assert toolset.closed == 1
    assert answer == "The sum is 8 and the difference is 8."
    offered = [t.name for t in model.requests[0].tools]
    assert offered == ["greet_user", "calculator_add_numbers", "calculator_subtract_numbers"]


async def test_artifact_saved_on_one_worker_is_loaded_on_another_with_versions(
    settings: Settings, fleet: WorkerGroup
) -> None:
    session_id = uuid.uuid4().hex
    tools = [*TOOLS, *tools_in_module(documents)]

    async def turn(*calls: Call, message: str = "go", user: str = "u1") -> list[CallFinished]:
        steps = [call(*calls), say("ok")] if calls else [say("noted")]
        agent = Agent(name="docs", tools=tools, model=ScriptedModel(steps))
        sid = session_id if calls else uuid.uuid4().hex
        async with Runner(agent, settings) as runner:
            updates = [u async for u in runner.run(user_id=user, session_id=sid, message=message)]
        return [u for u in updates if isinstance(u, CallFinished)]

    (v0,) = await turn(Call("save_document", {"document_name": "report.txt", "text": "draft"}))
    (v1,) = await turn(Call("save_document", {"document_name": "report.txt", "text": "final"}))
    assert (v0.result.response["version"], v1.result.response["version"]) == (0, 1)
    latest, first = await turn(
        Call("load_note", {"filename": "report.txt"}),
        Call("load_note", {"filename": "report.txt", "version": 0}),
    )
    # Saved by the io worker (save_document is async), loaded on `other`'s worker.
    assert latest.result.worker.startswith("w3@") and v1.result.worker.startswith("w6@")
    assert latest.result.response == {"text": "final", "names": ["report.txt"]}
    assert first.result.response["text"] == "draft"

    await turn(message="Reminder: the quarterly numbers look strong", user="u1")
    await turn(message="Our quarterly numbers are secret", user="someone-else")
    (analysis,) = await turn(
        Call("process_document", {"document_name": "report.txt", "analysis_query": "quarterly"})
    )
    response = analysis.result.response
    assert response["status"] == "success" and response["version"] == 0
    # Memory: a word match over this user's past sessions, never another user's.
    assert response["memory_context"] == ["Reminder: the quarterly numbers look strong"]
