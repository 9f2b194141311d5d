"""google-adk's own outcome of RunConfig(max_llm_calls=2) over an AgentTool whose agent
would ask its model three times: the turns of test_adk_nested_limit, played by a
scripted BaseLlm on ADK's InMemoryRunner. Prints the outcome as one line of JSON.

    python tests/integration/adk_nested_limit_reference.py

Run with a Python that has google-adk installed (toolfleet itself is not needed).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent, RunConfig
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.tools.agent_tool import AgentTool
from google.genai import types

# Model calls made, by agent (each ScriptedLlm's `model` is its agent's name).
CALLS: dict[str, int] = {}


class ScriptedLlm(BaseLlm):
    """Plays `turns` in order: a (tool, args) pair is a function call, a str the answer."""

    turns: list[Any]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        made = CALLS.get(self.model, 0)
        CALLS[self.model] = made + 1
        turn = self.turns[made]
        if isinstance(turn, str):
            part = types.Part(text=turn)
        else:
            name, args = turn
            part = types.Part(function_call=types.FunctionCall(id=f"c{made}", name=name, args=args))
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def adk_count_words(text: str) -> dict[str, int]:
    """Counts the words of a text.

    Args:
        text: The text.
    """
    return {"words": len(text.split())}


counter = LlmAgent(
    name="adk_limited_counter",
    description="Counts the words of a request, twice.",
    model=ScriptedLlm(
        model="adk_limited_counter",
        turns=[
            ("adk_count_words", {"text": "one two"}),
            ("adk_count_words", {"text": "one two three"}),
            "counted",
        ],
    ),
    tools=[adk_count_words],
)
asking = LlmAgent(
    name="adk_limited_asking",
    model=ScriptedLlm(
        model="adk_limited_asking",
        turns=[("adk_limited_counter", {"request": "count"}), "unreached"],
    ),
    tools=[AgentTool(agent=counter)],
)


async def main() -> None:
    runner = InMemoryRunner(agent=asking, app_name="limits")
    session = await runner.session_service.create_session(app_name="limits", user_id="u1")
    turns: list[list[str]] = []
    raised = None
    try:
        async for event in runner.run_async(
            user_id="u1",
            session_id=session.id,
            new_message=types.UserContent("Count my words"),
            run_config=RunConfig(max_llm_calls=2),
        ):
            if event.content:
                calls = [c.name or "" for c in event.get_function_calls()]
                turns.append([event.author, *calls])
    except Exception as exc:  # the outcome to report
        raised = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"raised": raised, "model_calls": CALLS, "turns": turns}, sort_keys=True))


if __name__ == "__main__":
    asyncio.run(main())
