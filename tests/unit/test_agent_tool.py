"""AgentTool: its declaration, and the bound on nesting."""

from __future__ import annotations

import time

import pytest

from examples.summarizer import root_agent, summary_agent
from toolfleet.orchestrator.agent_tool import MAX_DEPTH, AgentTool, run_agent_as_tool
from toolfleet.shared.context import ToolContext
from toolfleet.shared.errors import ToolError
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
