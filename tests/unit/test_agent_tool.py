"""AgentTool: its declaration, and the bound on nesting."""

from __future__ import annotations

import time

import pytest

from examples.summarizer import root_agent, summary_agent
from toolfleet.orchestrator.agent_tool import MAX_DEPTH, AgentTool, run_agent_as_tool
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolContext, ToolServices
from toolfleet.shared.errors import ToolDefinitionError, ToolError
from toolfleet.shared.messages import ToolCall


def test_agent_tool_is_declared_with_a_request_argument_on_the_agents_pool() -> None:
    tool = AgentTool(summary_agent, skip_summarization=True)
    assert tool.name == "summary_agent" and tool.options.pool == "agents"
    assert tool.description.startswith("Agent to summarize text")
    assert tool.parameters_json_schema["required"] == ["request"]
    # Two AgentTools of one agent are the same worker task, so a worker can register both.
    assert AgentTool(summary_agent).func is tool.func


def test_workers_learn_the_wrapped_agents_tools_too() -> None:
    assert {t.name for t in root_agent.all_tools()} == {"summary_agent", "count_words"}


async def test_nesting_deeper_than_the_bound_is_refused_with_a_clear_error() -> None:
    call = ToolCall(
        call_id="c", tool="summary_agent", args={"request": "x"}, session_id="s", app_name="a",
        user_id="u", invocation_id="i", agent="root_agent", reply_to="r",
        dispatched_at=time.time(), depth=MAX_DEPTH,
    )  # fmt: skip
    with pytest.raises(ToolError, match=f"would nest deeper than {MAX_DEPTH} levels"):
        await run_agent_as_tool(summary_agent, "x", ToolContext(call))


class _RunStarted(Exception):
    """Raised by the stand-in Runner once it knows the plugins the child run was given."""


def _child_plugins(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    """Replace the child's Runner with one that records its plugins and stops there."""
    from toolfleet.orchestrator.loop import runner as runner_module

    seen: list[tuple[object, ...]] = []

    class RecordingRunner:
        def __init__(self, *args: object, plugins: tuple[object, ...] = (), **kw: object) -> None:
            seen.append(tuple(plugins))

        async def __aenter__(self) -> None:
            raise _RunStarted

        async def __aexit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(runner_module, "Runner", RecordingRunner)
    return seen


def _call(app_name: str, max_llm_calls: int | None = None) -> ToolCall:
    return ToolCall(
        call_id="c", tool="summary_agent", args={"request": "x"}, session_id="s",
        app_name=app_name, user_id="u", invocation_id="i", agent="root_agent",
        reply_to="r", dispatched_at=time.time(), max_llm_calls=max_llm_calls,
    )  # fmt: skip


def _context(app_name: str, max_llm_calls: int | None = None) -> ToolContext:
    """The context a worker gives the call (its settings: a worker's own)."""
    services = ToolServices(settings=Settings(redis_url="redis://unused", key_prefix="t"))
    return ToolContext(_call(app_name, max_llm_calls), services)


async def test_an_agent_tools_run_has_its_apps_plugins_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolfleet.adk import App, BasePlugin
    from toolfleet.orchestrator.plugins.llm_calls import LlmCallLimit

    audit = BasePlugin(name="audit")
    App(name="plugged_app", root_agent=root_agent, plugins=[audit])  # as a worker imports it
    seen = _child_plugins(monkeypatch)

    for include in (True, False):
        with pytest.raises(_RunStarted):
            await run_agent_as_tool(summary_agent, "x", _context("plugged_app", 3), include)
    with pytest.raises(_RunStarted):  # an app defined nowhere in this process: none to have
        await run_agent_as_tool(summary_agent, "x", _context("elsewhere"), True)

    with_plugins, without, unknown = seen
    assert with_plugins[0] is audit and isinstance(with_plugins[1], LlmCallLimit)
    assert len(without) == 1 and isinstance(without[0], LlmCallLimit)
    assert unknown == ()


def test_agent_tools_of_one_agent_must_agree_on_include_plugins() -> None:
    from toolfleet.orchestrator.agents.agent import Agent

    lone = Agent(name="lone_agent", instruction="Answer.")
    spec = AgentTool(lone, include_plugins=False)
    assert (
        spec.include_plugins is False and AgentTool(lone, include_plugins=False).func is spec.func
    )
    with pytest.raises(ToolDefinitionError, match="disagree on include_plugins"):
        AgentTool(lone)
