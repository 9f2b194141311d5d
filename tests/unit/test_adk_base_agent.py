"""ADK's BaseAgent, callback aliases and App configs, as ADK's samples import them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolfleet.adk import (
    Agent,
    App,
    BaseAgent,
    EventsCompactionConfig,
    LoopAgent,
    NotPortedError,
    ResumabilityConfig,
    SequentialAgent,
)


def test_every_agent_is_a_base_agent() -> None:
    leaf = Agent(name="leaf")
    for agent in (leaf, SequentialAgent(name="seq", sub_agents=[leaf]), LoopAgent(name="l")):
        assert isinstance(agent, BaseAgent)
    assert not isinstance("leaf", BaseAgent)


def test_a_custom_agent_is_refused_saying_what_to_use() -> None:
    with pytest.raises(NotPortedError, match=r"class Mine\(BaseAgent\): custom agents .*"):

        class Mine(BaseAgent):
            async def _run_async_impl(self, ctx: object) -> None: ...

    with pytest.raises(NotPortedError, match="SequentialAgent, ParallelAgent and LoopAgent"):
        BaseAgent(name="bare")


def test_app_takes_adks_configs_with_adks_checks() -> None:
    app = App(
        name="app",
        root_agent=Agent(name="root"),
        resumability_config=ResumabilityConfig(is_resumable=True),
        events_compaction_config=EventsCompactionConfig(compaction_interval=2, overlap_size=1),
    )
    assert app.resumability_config.is_resumable
    with pytest.raises(ValidationError, match="must be set together"):
        EventsCompactionConfig(compaction_interval=2)
    with pytest.raises(ValidationError, match="At least one compaction trigger"):
        EventsCompactionConfig()


def test_adks_modules_imported_as_modules_give_toolfleet_adks_names() -> None:
    """`from google.adk.agents import sequential_agent` with its import line changed."""
    from toolfleet.adk import SequentialAgent, ToolContext, agents, sequential_agent, tool_context

    assert sequential_agent.SequentialAgent is SequentialAgent
    assert tool_context.ToolContext is ToolContext and agents.Agent is Agent
    with pytest.raises(AttributeError, match=r"toolfleet.adk.sequential_agent .* 'Nope'"):
        _ = sequential_agent.Nope
    with pytest.raises(ImportError):
        from toolfleet.adk import not_an_adk_module  # type: ignore[attr-defined]  # noqa: F401
