"""The Model protocol: contents and tool declarations in, one model Content out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from google.genai import types

from toolfleet.shared.tools import FunctionTool

# The author of a content that carries the agent's instruction as a user turn (ADK's,
# with static_instruction set): no one's message.
INSTRUCTION_AUTHOR = "instruction"

# Ids the loop gives calls that came without one; never sent back to the model.
CLIENT_CALL_ID_PREFIX = "tf-"


def is_client_call_id(call_id: str | None) -> bool:
    """Whether the loop made this call id up (the model gave none, or a repeat)."""
    return bool(call_id) and str(call_id).startswith(CLIENT_CALL_ID_PREFIX)


@dataclass
class ModelRequest:
    """What a model gets for one turn: instruction, conversation so far, tools on offer.

    Not frozen: a before_model callback may change it (ADK's LlmRequest) before it is sent.
    """

    agent_name: str
    instruction: str
    contents: Sequence[types.Content]
    tools: Sequence[FunctionTool]
    # Who wrote each content ("user", an agent's name, "completion"); may be empty.
    authors: Sequence[str] = ()
    # The agent's generate_content_config (a copy: a callback may change it); the model
    # adds the instruction and tools to it.
    config: types.GenerateContentConfig | None = None


class Model(Protocol):
    """Implemented by GeminiModel and ScriptedModel (the offline model)."""

    @property
    def name(self) -> str:
        """The model's name as shown to people, e.g. by the CLI when a conversation starts."""
        ...

    async def generate(self, request: ModelRequest) -> types.Content:
        """The model's next turn (role "model"): text and/or function calls.

        Raises ModelError when no usable turn can be had.
        """
        ...


def function_calls(content: types.Content) -> list[types.FunctionCall]:
    """The function calls of a content, in order."""
    return [p.function_call for p in content.parts or () if p.function_call is not None]


def text_of(content: types.Content | None) -> str:
    """The visible text of a content, thought parts left out; "" for None."""
    if content is None:
        return ""
    return "".join(p.text for p in content.parts or () if p.text and not p.thought)
