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
