"""ADK's Runner construction (App, InMemoryRunner, auto_create_session), RunConfig, and
the max_llm_calls limit it sets on a run."""

from __future__ import annotations

import asyncio
import inspect

import pytest
from google.genai import types

from tests.support import InProcessRunner
from tests.unit.test_loop import add
from toolfleet.adk import (
    Agent,
    App,
    BasePlugin,
    InMemoryRunner,
    InMemorySessionService,
    LlmCallsLimitExceededError,
    RedisSessionService,
    RunConfig,
    Runner,
    StreamingMode,
)
from toolfleet.orchestrator.adk.run_config import DEFAULT_MAX_LLM_CALLS, LlmCallLimit
from toolfleet.orchestrator.loop.invocation import Invocation
from toolfleet.orchestrator.loop.run import run_invocation
from toolfleet.orchestrator.models.offline import Call, ScriptedModel, call, say
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys

# The fields of google.adk.agents.RunConfig: a program may set any of them.
ADK_RUN_CONFIG_FIELDS = (
    "speech_config",
    "http_options",
    "labels",
    "service_tier",
    "response_modalities",
    "avatar_config",
    "save_input_blobs_as_artifacts",
    "support_cfc",
    "streaming_mode",
    "output_audio_transcription",
    "input_audio_transcription",
    "realtime_input_config",
    "explicit_vad_signal",
    "translation_config",
    "enable_affective_dialog",
    "proactivity",
    "session_resumption",
    "history_config",
    "context_window_compression",
    "save_live_blob",
    "tool_thread_pool_config",
    "save_live_audio",
    "max_llm_calls",
    "custom_metadata",
    "telemetry",
    "get_session_config",
    "model_input_context",
    "include_thoughts_from_other_agents",
)
AGENT = Agent(name="helper", instruction="Help.", tools=[add])


class Counting(BasePlugin):
    """A plugin that notes every model call it sees."""

    def __init__(self) -> None:
        super().__init__(name="counting")
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def service() -> RedisSessionService:
    return RedisSessionService(Settings(redis_url="redis://127.0.0.1:1/0"))


def test_a_runner_of_an_app_runs_its_agent_with_its_plugins() -> None:
    plugin = Counting()
    runner = Runner(
        app=App(name="helpdesk", root_agent=AGENT, plugins=[plugin]), session_service=service()
    )
    assert (runner.app_name, runner.agent, runner.plugins) == ("helpdesk", AGENT, (plugin,))
    assert Runner(app=runner.app, app_name="other", session_service=service()).app_name == "other"


def test_runner_refuses_what_adks_refuses() -> None:
    app = App(name="helpdesk", root_agent=AGENT)
    with pytest.raises(ValueError, match="exactly one of app or agent"):
        Runner(app=app, agent=AGENT, session_service=service())
    with pytest.raises(ValueError, match="exactly one of app or agent"):
        Runner(app_name="x", session_service=service())
    with pytest.raises(ValueError, match="plugins should not be provided"):
        Runner(app=app, plugins=[Counting()], session_service=service())
    with pytest.raises(ValueError, match="app_name is required"):
        Runner(agent=AGENT, session_service=service())
    with pytest.raises(ValueError, match="Invalid app name"):
        App(name="9 lives", root_agent=AGENT)
    with pytest.raises(ValueError, match="root_agent must be provided"):
        App(name="helpdesk")


def test_in_memory_runner_uses_the_local_default_services() -> None:
    runner = InMemoryRunner(agent=AGENT)
    assert runner.app_name == "InMemoryRunner" and runner.agent is AGENT
    assert isinstance(runner.session_service, InMemorySessionService)
    assert not runner.auto_create_session
    named = InMemoryRunner(agent=AGENT, app_name="helpdesk", plugins=[Counting()])
    assert named.app_name == "helpdesk" and len(named.plugins) == 1
    assert InMemoryRunner(app=App(name="desk", root_agent=AGENT)).app_name == "desk"
    assert Runner(agent=AGENT, app_name="a", session_service=service(), auto_create_session=True)


def test_run_debug_and_close_are_adks_coroutines_and_close_closes_the_plugins() -> None:
    plugin = Counting()
    runner = InMemoryRunner(app=App(name="desk", root_agent=AGENT, plugins=[plugin]))
    assert inspect.iscoroutinefunction(runner.run_debug)
    assert list(inspect.signature(runner.run_debug).parameters) == [
        "user_messages",
        "user_id",
        "session_id",
        "run_config",
        "quiet",
        "verbose",
    ]
    asyncio.run(runner.close())
    assert plugin.closed
    again = Counting()

    async def use() -> None:
        async with InMemoryRunner(agent=AGENT, plugins=[again]):
            assert not again.closed

    asyncio.run(use())
    assert again.closed


def test_run_config_takes_every_field_of_adks_and_no_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ADK_MAX_LLM_CALLS", "7")
    assert RunConfig().max_llm_calls == 7
    monkeypatch.delenv("ADK_MAX_LLM_CALLS")
    assert set(ADK_RUN_CONFIG_FIELDS) <= set(RunConfig.model_fields)
    config = RunConfig(max_llm_calls=3, streaming_mode=StreamingMode.SSE, custom_metadata={"k": 1})
    assert config.max_llm_calls == 3 and RunConfig().max_llm_calls == DEFAULT_MAX_LLM_CALLS
    with pytest.raises(ValueError, match="max_llm_call"):
        RunConfig(max_llm_call=3)  # type: ignore[call-arg]


def test_a_runner_refuses_another_librarys_run_config() -> None:
    runner = Runner(agent=AGENT, app_name="a", session_service=service())
    events = runner.run_async(
        user_id="u",
        session_id="s",
        new_message=types.UserContent("hi"),
        run_config=object(),  # type: ignore[arg-type]
    )
    with pytest.raises(TypeError, match=r"import RunConfig from toolfleet\.adk"):
        asyncio.run(events.__anext__())


async def test_a_model_call_past_max_llm_calls_raises_as_adks(store: SessionStore) -> None:
    model = ScriptedModel(
        [call(Call("add", {"a": 1, "b": 2})), call(Call("add", {"a": 3, "b": 4})), say("7")]
    )
    session = await store.get_or_create("app", "u1", "s1")
    inv = Invocation(
        AGENT, lambda _: model, session, store, InProcessRunner(), Settings(), Keys("t")
    )
    inv.plugins = (Counting(), LlmCallLimit(RunConfig(max_llm_calls=2).max_llm_calls))
    message = types.Content(role="user", parts=[types.Part(text="go")])
    with pytest.raises(LlmCallsLimitExceededError, match="limit of `2` exceeded"):
        _ = [u async for u in run_invocation(inv, message)]
    assert len(model.requests) == 2  # the third call was never made


async def test_no_limit_at_zero(store: SessionStore) -> None:
    model = ScriptedModel([call(Call("add", {"a": 1, "b": 2})), say("3")])
    session = await store.get_or_create("app", "u1", "s1")
    inv = Invocation(
        AGENT, lambda _: model, session, store, InProcessRunner(), Settings(), Keys("t")
    )
    inv.plugins = (LlmCallLimit(0),)
    message = types.Content(role="user", parts=[types.Part(text="go")])
    _ = [u async for u in run_invocation(inv, message)]
    assert len(model.requests) == 2
