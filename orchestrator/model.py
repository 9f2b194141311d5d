"""The Model protocol: contents and tool declarations in, one model Content out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from google.genai import types

from shared.tools import FunctionTool

# Ids the loop gives calls that came without one; never sent back to the model.
CLIENT_CALL_ID_PREFIX = "tf-"


def is_client_call_id(call_id: str | None) -> bool:
    return bool(call_id) and str(call_id).startswith(CLIENT_CALL_ID_PREFIX)


@dataclass(frozen=True)
class ModelRequest:
    agent_name: str
    instruction: str
    contents: Sequence[types.Content]
    tools: Sequence[FunctionTool]
    # Who wrote each content ("user", an agent's name, "completion"); may be empty.
    authors: Sequence[str] = ()


class Model(Protocol):
    """Implemented by GeminiModel and ScriptedModel (the offline model)."""

    @property
    def name(self) -> str: ...

    async def generate(self, request: ModelRequest) -> types.Content: ...


def function_calls(content: types.Content) -> list[types.FunctionCall]:
    return [p.function_call for p in content.parts or () if p.function_call is not None]


def text_of(content: types.Content | None) -> str:
    if content is None:
        return ""
    return "".join(p.text for p in content.parts or () if p.text and not p.thought)
