"""A front-desk agent for ADK's HTTP API: a quick lookup that writes state, a tool that
saves an artifact, and a long-running approval. Its model is a script, so ADK and
toolfleet see the same turns.

The model reads the user's latest text: "stock <item>" checks the stock, "note <text>"
saves a note, "refund <amount>" asks for an approval; once the tools have answered, it
says what the last response was. The imports are the only lines that differ on ADK
(google.adk's names for the same things)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from google.genai import types

from toolfleet.adk import (
    Agent,
    BaseLlm,
    LlmRequest,
    LlmResponse,
    LongRunningFunctionTool,
    ToolContext,
)


def check_stock(item: str, tool_context: ToolContext) -> dict[str, Any]:
    """How many of `item` the desk has; remembers the item asked about."""
    tool_context.state["last_item"] = item
    return {"item": item, "in_stock": len(item)}


async def save_note(text: str, tool_context: ToolContext) -> dict[str, Any]:
    """Keep `text` as the note.txt artifact; returns its version."""
    version = await tool_context.save_artifact("note.txt", types.Part(text=text))
    return {"saved": "note.txt", "version": version}


def request_refund(amount: int) -> dict[str, Any]:
    """Ask a manager to approve a refund of `amount`; the answer comes later."""
    return {"status": "pending", "amount": amount}


class DeskScript(BaseLlm):
    """The desk's model: one tool call for the user's request, then a sentence."""

    model: str = "desk-script"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        responses = [p.function_response for p in last.parts or () if p.function_response]
        if responses:
            said = json.dumps(responses[-1].response, sort_keys=True)
            yield LlmResponse(content=_model_text(f"{responses[-1].name} answered {said}"))
            return
        text = " ".join(p.text for p in last.parts or () if p.text).strip()
        verb, _, rest = text.partition(" ")
        if verb == "stock":
            call = types.FunctionCall(name="check_stock", args={"item": rest})
        elif verb == "note":
            call = types.FunctionCall(name="save_note", args={"text": rest})
        elif verb == "refund" and rest.isdigit():
            call = types.FunctionCall(name="request_refund", args={"amount": int(rest)})
        else:
            yield LlmResponse(content=_model_text(f"I can check stock, note, refund: {text}"))
            return
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(function_call=call)])
        )


def _model_text(text: str) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text=text)])


root_agent = Agent(
    name="desk",
    model=DeskScript(),
    instruction="Help the customer at the desk.",
    tools=[check_stock, save_note, LongRunningFunctionTool(request_refund)],
)
