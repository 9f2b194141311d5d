"""ADK's set_model_response: an agent with an output schema and tools is offered it, its
arguments are checked against the schema, and a valid call's arguments are the answer."""

from __future__ import annotations

import json
import time

from pydantic import BaseModel

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.agents.structured import (
    SET_MODEL_RESPONSE,
    SetModelResponseTool,
    answer_structured,
    structured_answer,
    structured_answer_tool,
)
from toolfleet.orchestrator.agents.transfer import offered_tools
from toolfleet.shared.messages import CallStatus, ToolCall, error_result
from toolfleet.shared.toolsets import ReadonlyContext


class TeaOrder(BaseModel):
    """An order the kitchen can make."""

    tea: str
    cups: int


def list_teas() -> list[str]:
    """The teas on the menu today."""
    return ["green", "oolong"]


def a_call(args: dict[str, object]) -> ToolCall:
    return ToolCall(
        call_id="c1", tool=SET_MODEL_RESPONSE, args=args, session_id="s", app_name="a",
        user_id="u", invocation_id="i", agent="desk", reply_to="r", dispatched_at=time.time(),
    )  # fmt: skip


async def test_only_an_agent_with_an_output_schema_and_tools_is_offered_it() -> None:
    def context() -> ReadonlyContext:
        raise AssertionError("no instruction provider here")

    both = Agent(name="desk", tools=[list_teas], output_schema=TeaOrder)
    offered = await offered_tools(both, context)
    tool = offered[SET_MODEL_RESPONSE]
    assert isinstance(tool, SetModelResponseTool)
    assert tool.declaration()["parameters_json_schema"]["required"] == ["tea", "cups"]
    no_tools = Agent(name="plain", output_schema=TeaOrder)
    assert SET_MODEL_RESPONSE not in await offered_tools(no_tools, context)
    no_schema = Agent(name="tools", tools=[list_teas])
    assert SET_MODEL_RESPONSE not in await offered_tools(no_schema, context)
    assert structured_answer_tool(both, offered=False) is None


def test_its_arguments_are_checked_and_a_valid_call_is_the_answer() -> None:
    tool = structured_answer_tool(
        Agent(name="desk", tools=[list_teas], output_schema=TeaOrder), True
    )
    assert tool is not None
    _, problems = tool.validate({"tea": "oolong"})
    assert [p.argument for p in problems] == ["cups"]
    _, problems = tool.validate({"tea": "oolong", "cups": "many"})
    assert [p.argument for p in problems] == ["cups"]
    result = answer_structured(a_call({"tea": "oolong", "cups": 2}), tool)
    assert result.status is CallStatus.SUCCESS and result.response == {"tea": "oolong", "cups": 2}
    assert json.loads(structured_answer([result]) or "") == {"tea": "oolong", "cups": 2}


def test_a_failed_call_or_a_users_tool_of_that_name_is_no_answer() -> None:
    failed = error_result(a_call({}), "InvalidArguments", "cups missing", worker="orchestrator")
    assert structured_answer([failed]) is None
    tool = structured_answer_tool(
        Agent(name="desk", tools=[list_teas], output_schema=TeaOrder), True
    )
    assert tool is not None
    theirs = answer_structured(a_call({"tea": "green", "cups": 1}), tool).model_copy(
        update={"worker": "w1@host"}
    )
    assert structured_answer([theirs]) is None
