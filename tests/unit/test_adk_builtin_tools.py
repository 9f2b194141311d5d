"""ADK's built-in tools on the loop, with the offline model: load_artifacts,
load_memory, preload_memory, get_user_choice and ExampleTool, as ADK programs use them."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import fakeredis
import pytest
from google.genai import types

from tests.support import InProcessRunner
from toolfleet.adk import (
    Agent,
    BaseExampleProvider,
    BaseTool,
    Example,
    ExampleTool,
    ToolContext,
    get_user_choice,
    load_artifacts,
    load_memory,
    preload_memory,
)
from toolfleet.orchestrator.loop import tool_requests
from toolfleet.orchestrator.loop.invocation import (
    EndReason,
    Invocation,
    InvocationEnded,
    Update,
)
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, ScriptView, call, say
from toolfleet.orchestrator.models.protocol import text_of
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.artifacts import ArtifactStore
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolServices
from toolfleet.shared.discovery import tools_in_module
from toolfleet.shared.keys import Keys
from toolfleet.shared.load_artifacts import safe_part
from toolfleet.shared.memory import MemoryStore
from toolfleet.shared.messages import CallStatus
from toolfleet.shared.request_hooks import LlmRequest, RequestContext

KEYS = Keys("t")  # the store fixture's


@pytest.fixture
def fleet_redis(
    fake_server: fakeredis.FakeServer, monkeypatch: pytest.MonkeyPatch
) -> fakeredis.FakeRedis:
    """The Redis the store uses, as the workers and the request hooks reach it."""
    client = fakeredis.FakeRedis(server=fake_server)
    monkeypatch.setattr(tool_requests, "redis_client", lambda settings: client)
    return client


async def run(
    store: SessionStore,
    agent: Agent,
    message: str,
    client: fakeredis.FakeRedis,
    *,
    user: str = "u1",
    session_id: str = "s1",
) -> list[Update]:
    session = await store.get_or_create("app", user, session_id)
    services = ToolServices(artifacts=ArtifactStore(client, KEYS), memory=MemoryStore(client, KEYS))
    runner = InProcessRunner(services=services, tickets=Completions(client, KEYS))
    model = agent.model
    assert isinstance(model, ScriptedModel)
    inv = Invocation(agent, lambda _: model, session, store, runner, Settings(), KEYS)
    content = types.Content(role="user", parts=[types.Part(text=message)])
    return [u async for u in run_invocation(inv, content)]


def text_artifact(text: str) -> types.Part:
    return types.Part(inline_data=types.Blob(mime_type="text/plain", data=text.encode()))


async def test_load_artifacts_sends_the_asked_for_artifacts_with_the_next_model_call_only(
    store: SessionStore, fleet_redis: fakeredis.FakeRedis
) -> None:
    artifacts = ArtifactStore(fleet_redis, KEYS)
    artifacts.save("app", "u1", "s1", "notes.txt", text_artifact("the launch is on Friday"))
    png = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG..."))
    artifacts.save("app", "u1", "other", "user:logo.png", png)
    artifacts.save("app", "u1", "other", "secret.txt", text_artifact("another session's"))
    artifacts.save("app", "u2", "s1", "theirs.txt", text_artifact("another user's"))
    asked = ["notes.txt", "logo.png", "secret.txt", "theirs.txt"]
    model = ScriptedModel(
        [
            call(Call("load_artifacts", {"artifact_names": asked})),
            lambda v: say(f"Read: {v.response('load_artifacts')['artifact_names']}"),
            say("Again?"),
        ]
    )
    agent = Agent(name="reader", instruction="Help.", model=model, tools=[load_artifacts])

    updates = await run(store, agent, "When is the launch?", fleet_redis)

    first, second = model.requests
    assert [t.name for t in first.tools] == ["load_artifacts"]
    # The model is told what there is (this session's and the user's), and nothing else.
    assert '["notes.txt", "user:logo.png"]' in first.instruction
    assert "secret.txt" not in first.instruction and "theirs.txt" not in first.instruction
    # After the call, the artifacts it named that the session has go with the next call.
    added = list(second.contents[-2:])
    assert [c.parts[0].text for c in added if c.parts] == [
        "Artifact notes.txt is:",
        "Artifact logo.png is:",
    ]
    assert added[0].parts is not None and added[0].parts[1].text == "the launch is on Friday"
    assert added[1].parts is not None and added[1].parts[1].inline_data == png.inline_data
    assert not any("another" in (p.text or "") for c in second.contents for p in c.parts or ())
    # The worker answered with the names; the session keeps that, never the content.
    stored = await store.get_or_create("app", "u1", "s1")
    assert text_of(stored.events[-1].content) == f"Read: {asked}"
    assert all("the launch is on Friday" not in e.model_dump_json() for e in stored.events)
    assert isinstance(updates[-1], InvocationEnded)


async def test_load_memory_searches_this_users_sessions_on_the_fleet(
    store: SessionStore, fleet_redis: fakeredis.FakeRedis
) -> None:
    remember = Agent(name="desk", model=ScriptedModel([say("Noted.")]))
    await run(store, remember, "My favourite colour is teal", fleet_redis, session_id="old")
    await run(store, remember, "My favourite colour is red", fleet_redis, user="u2")

    def memories(view: ScriptView) -> str:
        found = view.response("load_memory")["memories"]
        return " | ".join(f"{m['author']}: {m['content']['parts'][0]['text']}" for m in found)

    model = ScriptedModel(
        [call(Call("load_memory", {"query": "favourite colour"})), lambda v: say(memories(v))]
    )
    agent = Agent(name="desk", instruction="Help.", model=model, tools=[load_memory])

    await run(store, agent, "Which colour do I like?", fleet_redis)

    assert [t.name for t in model.requests[0].tools] == ["load_memory"]
    assert "You have memory." in model.requests[0].instruction
    stored = await store.get_or_create("app", "u1", "s1")
    answer = text_of(stored.events[-1].content)
    assert "user: My favourite colour is teal" in answer
    assert "red" not in answer  # another user's memory is not this one's


async def test_preload_memory_puts_matching_memories_in_the_instruction_and_is_not_offered(
    store: SessionStore, fleet_redis: fakeredis.FakeRedis
) -> None:
    remember = Agent(name="desk", model=ScriptedModel([say("Noted.")]))
    await run(store, remember, "My favourite colour is teal", fleet_redis, session_id="old")
    await run(store, remember, "My favourite colour is red", fleet_redis, user="u2")
    model = ScriptedModel([say("Teal.")])
    agent = Agent(name="desk", instruction="Help.", model=model, tools=[preload_memory])

    await run(store, agent, "Which colour is my favourite?", fleet_redis)

    (request,) = model.requests
    assert list(request.tools) == []  # it only changes the request
    assert "<PAST_CONVERSATIONS>" in request.instruction
    assert "user: My favourite colour is teal" in request.instruction
    assert "red" not in request.instruction
    assert request.instruction.startswith("Help.")


async def test_get_user_choice_answers_pending_and_waits_for_the_users_choice(
    store: SessionStore, fleet_redis: fakeredis.FakeRedis
) -> None:
    model = ScriptedModel([call(Call("get_user_choice", {"options": ["basic", "pro"]}))])
    agent = Agent(name="shop", instruction="Sell.", model=model, tools=[get_user_choice])

    updates = await run(store, agent, "Which plan?", fleet_redis)

    (declaration,) = [t.declaration() for t in model.requests[0].tools]
    assert declaration["parameters_json_schema"]["required"] == ["options"]
    assert "long-running" in declaration["description"]
    session = await store.get_or_create("app", "u1", "s1")
    (pending,) = await store.pending_calls(session.key)
    assert pending.tool == "get_user_choice" and pending.args == {"options": ["basic", "pro"]}
    (result,) = [c for e in session.events for c in e.calls]
    assert result.status is CallStatus.PENDING
    ended = updates[-1]
    assert isinstance(ended, InvocationEnded) and ended.reason is EndReason.SKIPPED_SUMMARY


EXPECTED_EXAMPLES = (
    "<EXAMPLES>\nBegin few-shot\nThe following are examples of user queries and model "
    "responses using the available tools.\n\nEXAMPLE 1:\nBegin example\n[user]\nSay hi to "
    "Ann\n[model]\n```\ngreet(name='Ann', times=2)\n```\nDone.\nEnd example\n\nEnd few-shot"
    "\n<EXAMPLES>"
)  # what ADK's example_util.build_example_si writes for GREETING


GREETING: dict[str, Any] = {
    "input": {"role": "user", "parts": [{"text": "Say hi to Ann"}]},
    "output": [
        {
            "role": "model",
            "parts": [
                {"function_call": {"name": "greet", "args": {"name": "Ann", "times": 2}}},
                {"text": "Done."},
            ],
        }
    ],
}


class ByWord(BaseExampleProvider):
    """Examples chosen for the user's message."""

    def __init__(self) -> None:
        self.queries: list[str] = []

    def get_examples(self, query: str) -> list[Example]:
        self.queries.append(query)
        return [Example.model_validate(GREETING)] if "hi" in query else []


async def test_example_tool_adds_adks_few_shot_text_to_the_instruction(
    store: SessionStore, fleet_redis: fakeredis.FakeRedis
) -> None:
    model = ScriptedModel([say("Hi Ann!"), say("Hi Bob!")])
    provider = ByWord()
    agent = Agent(
        name="greeter",
        instruction="Greet.",
        model=model,
        tools=[ExampleTool([GREETING]), ExampleTool(provider)],
    )

    await run(store, agent, "Say hi to Bob", fleet_redis)

    (request,) = model.requests
    assert list(request.tools) == []
    assert request.instruction.count(EXPECTED_EXAMPLES) == 2
    assert provider.queries == ["Say hi to Bob"]
    with pytest.raises(TypeError, match="list of Example or a BaseExampleProvider"):
        ExampleTool("examples")  # type: ignore[arg-type]


class Weather(BaseTool):
    """A custom tool of one's own with ADK's hook: offered, run, and it changes requests."""

    def __init__(self) -> None:
        super().__init__(name="weather", description="The weather.")

    def _get_declaration(self) -> types.FunctionDeclaration:
        return types.FunctionDeclaration(name=self.name, description=self.description)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        return {"sky": "clear"}

    async def process_llm_request(
        self, *, tool_context: RequestContext, llm_request: LlmRequest
    ) -> None:
        await super().process_llm_request(tool_context=tool_context, llm_request=llm_request)
        asked = tool_context.user_content
        assert asked is not None and asked.parts is not None
        who = f"{tool_context.agent_name} was asked {asked.parts[0].text!r}"
        llm_request.append_instructions([f"{who} by {tool_context.user_id}."])


async def test_a_base_tool_of_ones_own_changes_the_request_and_is_still_offered(
    store: SessionStore, fleet_redis: fakeredis.FakeRedis
) -> None:
    model = ScriptedModel([say("Clear.")])
    agent = Agent(name="forecaster", instruction="Forecast.", model=model, tools=[Weather()])

    await run(store, agent, "Weather?", fleet_redis)

    (request,) = model.requests
    assert [t.name for t in request.tools] == ["weather"]
    assert request.instruction.startswith("Forecast.")
    assert request.instruction.endswith("forecaster was asked 'Weather?' by u1.")


def test_a_worker_serves_the_tools_that_run_and_skips_those_that_only_change_requests(
    caplog: pytest.LogCaptureFixture,
) -> None:
    module = ModuleType("adk_program")
    module.agent = Agent(  # type: ignore[attr-defined]
        name="helper",
        model=ScriptedModel([say("Hi.")]),
        tools=[load_artifacts, load_memory, get_user_choice, preload_memory, ExampleTool([])],
    )
    module.preload_memory = preload_memory  # type: ignore[attr-defined]
    module.examples = ExampleTool([GREETING])  # type: ignore[attr-defined]

    served = {t.name for t in tools_in_module(module)}

    assert served == {"load_artifacts", "load_memory", "get_user_choice"}
    assert "cannot list its tools" not in caplog.text  # nothing to serve is no error


def test_an_artifact_goes_to_the_model_as_media_text_or_a_placeholder() -> None:
    pdf = types.Part(inline_data=types.Blob(mime_type="application/pdf", data=b"%PDF"))
    assert safe_part(pdf, "a.pdf") is pdf
    csv = types.Part(inline_data=types.Blob(mime_type="application/octet-stream", data=b"a,b"))
    assert safe_part(csv, "t.csv").text == "a,b"
    svg = types.Part(inline_data=types.Blob(mime_type="image/svg+xml", data=b"<svg/>"))
    assert safe_part(svg, "logo.svg").text == "<svg/>"  # Gemini refuses it inline
    zipped = types.Part(inline_data=types.Blob(mime_type="application/zip", data=b"PK" * 512))
    assert safe_part(zipped, "x.zip").text == (
        "[Binary artifact: x.zip, type: application/zip, size: 1.0 KB. "
        "Content cannot be displayed inline.]"
    )
