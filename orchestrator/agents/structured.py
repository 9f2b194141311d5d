"""ADK's `set_model_response`: how an agent with an `output_schema` and tools gives its
final answer. Gemini (off Vertex AI) takes no response schema beside function calling,
so, as ADK does, the model is offered this function, whose arguments are the schema's
fields; the orchestrator answers the call itself (it needs no worker), and its
validated arguments, as JSON, are the agent's final answer."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.shared.messages import CallStatus, ToolCall, ToolResult, answered_result
from toolfleet.shared.schema import ArgumentProblem, validate_arguments
from toolfleet.shared.tools import FunctionTool

SET_MODEL_RESPONSE = "set_model_response"
STRUCTURED_INSTRUCTION = (
    f"When you have the final answer, give it by calling the `{SET_MODEL_RESPONSE}` "
    "function with the answer's fields as its arguments; do not write it as text. Use "
    "your other tools first if you need them."
)


def set_model_response() -> None:
    """Give your final answer in the required structure. Call this function with the
    answer's fields once you have them, instead of writing the answer as text."""
    # The declaration's source; the orchestrator answers the call (answer_structured).


@dataclass(frozen=True, eq=False)
class SetModelResponseTool(FunctionTool):
    """`set_model_response` for one output schema: its arguments are the schema's fields."""

    # Answered in the orchestrator (loop.turn): never sent to a worker nor registered on
    # one, since Agent.all_tools does not list it.
    schema: type[BaseModel] = field(default=BaseModel, kw_only=True)

    @property
    def parameters_json_schema(self) -> dict[str, Any]:
        """The output schema's JSON Schema: the call's arguments are the answer."""
        return self.schema.model_json_schema()

    def validate(self, args: object) -> tuple[dict[str, Any], list[ArgumentProblem]]:
        """The arguments checked against the output schema: (its fields, problems)."""
        return validate_arguments(self.schema, args)


def structured_answer_tool(agent: Agent, offered: bool) -> SetModelResponseTool | None:
    """The agent's `set_model_response` when it has an output schema and is `offered`
    other tools (without tools the schema goes to the model as its response schema)."""
    if agent.output_schema is None or not offered:
        return None
    return SetModelResponseTool(set_model_response, SET_MODEL_RESPONSE, schema=agent.output_schema)


def answer_structured(call: ToolCall, tool: SetModelResponseTool) -> ToolResult:
    """The response to a valid `set_model_response` call, made here: its arguments, as
    ADK answers it."""
    value = tool.schema.model_validate(call.args).model_dump(mode="json")
    return answered_result(call, CallStatus.SUCCESS, value, worker="orchestrator")


def structured_answer(results: list[ToolResult]) -> str | None:
    """The final answer a turn's successful `set_model_response` gave, as JSON text; None
    when the turn has none."""
    for result in results:
        answered_here = result.worker == "orchestrator"  # not a user's tool of that name
        if (
            result.tool == SET_MODEL_RESPONSE
            and answered_here
            and result.status is CallStatus.SUCCESS
        ):
            return json.dumps(result.response, ensure_ascii=False)
    return None
