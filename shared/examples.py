"""ADK's few-shot examples: `ExampleTool(examples)` in an agent's tools adds them to the
system instruction before each model call (never offered to the model, never run).

`examples` is a list of Example (or of dicts of its fields), or a BaseExampleProvider
that chooses them for the user's message. The text is ADK's, in its Gemini form.
"""

from __future__ import annotations

import abc
from typing import Any

from google.genai import types
from pydantic import BaseModel, TypeAdapter

from toolfleet.shared.base_tool import BaseTool
from toolfleet.shared.request_hooks import LlmRequest, RequestContext, text_of_content

_INTRO = (
    "<EXAMPLES>\nBegin few-shot\nThe following are examples of user queries and"
    " model responses using the available tools.\n\n"
)
_END = "End few-shot\n<EXAMPLES>"
_USER, _MODEL = "[user]\n", "[model]\n"
_FENCE, _FENCE_END = "```\n", "\n```\n"


class Example(BaseModel):
    """A few-shot example: the user's input and the contents that answer it.

    Attributes:
        input: The user's message.
        output: The contents that answer it, in order: the model's text and function
            calls, and the function responses.
    """

    input: types.Content
    output: list[types.Content]


class BaseExampleProvider(abc.ABC):
    """Chooses the examples for a query (the user's message)."""

    @abc.abstractmethod
    def get_examples(self, query: str) -> list[Example]:
        """The examples to show for `query`."""


def examples_text(examples: list[Example]) -> str:
    """The examples as ADK writes them into the system instruction."""
    written = ""
    for number, example in enumerate(examples, start=1):
        out = f"EXAMPLE {number}:\nBegin example\n{_USER}"
        if example.input.parts:
            out += "\n".join(p.text for p in example.input.parts if p.text) + "\n"
        previous = None
        for content in example.output:
            role = _MODEL if content.role == "model" else _USER
            if role != previous:
                out += role
            previous = role
            for part in content.parts or ():
                out += _part_text(part)
        written += out + "End example\n\n"
    return f"{_INTRO}{written}{_END}"


def _part_text(part: types.Part) -> str:
    if part.function_call:
        args = part.function_call.args if isinstance(part.function_call.args, dict) else {}
        shown = ", ".join(
            f"{k}='{v}'" if isinstance(v, str) else f"{k}={v}" for k, v in args.items()
        )
        return f"{_FENCE}{part.function_call.name}({shown}){_FENCE_END}"
    if part.function_response:
        return f"{_FENCE}{part.function_response.__dict__}{_FENCE_END}"
    if part.text:
        return f"{part.text}\n"
    return ""


class ExampleTool(BaseTool):
    """ADK's ExampleTool: adds (few-shot) examples to each model request.

    Before each model call it appends the examples to the system instruction, when the
    user's message has content; the model is never offered it as a tool.

    Args:
        examples: The examples (Example, or dicts of its fields, validated here), or a
            provider that chooses them for the text of the user's message (not asked when
            that text is empty).

    Raises:
        TypeError: `examples` is neither a list nor a BaseExampleProvider.
        pydantic.ValidationError: An item of the list is not an Example.
    """

    def __init__(self, examples: list[Example] | list[dict[str, Any]] | BaseExampleProvider):
        super().__init__(name="example_tool", description="example tool")
        if not isinstance(examples, list | BaseExampleProvider):
            raise TypeError(
                "ExampleTool(examples): pass a list of Example or a BaseExampleProvider, "
                f"not {type(examples).__name__}"
            )
        self.examples: list[Example] | BaseExampleProvider = (
            TypeAdapter(list[Example]).validate_python(examples)
            if isinstance(examples, list)
            else examples
        )

    async def process_llm_request(
        self, *, tool_context: RequestContext, llm_request: LlmRequest
    ) -> None:
        """Add the examples (a provider's, for the user's message) to the instruction."""
        user = tool_context.user_content
        if user is None or not user.parts:
            return
        query = text_of_content(user)
        if isinstance(self.examples, BaseExampleProvider):
            if not query:
                return
            chosen = self.examples.get_examples(query)
        else:
            chosen = self.examples
        llm_request.append_instructions([examples_text(chosen)])
