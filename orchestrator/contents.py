"""google-genai Contents that toolfleet builds itself, made without re-validation.

google-genai's models run a validator on construction that walks every field of the
model (a Part has 15): about 25 us a Part, ten Parts and Contents a no-op turn, some 8%
of an orchestrator's CPU per call (issue 15 B). What is built here has its fields' types
by construction (the texts, names and dicts come from our own code or the user's
message), so `model_construct` makes the same objects: equal to validated ones, and
serialized alike.
"""

from __future__ import annotations

from typing import Any

from google.genai import types


def text_part(text: str) -> types.Part:
    """`types.Part(text=text)`."""
    return types.Part.model_construct(text=text)


def call_part(name: str, args: dict[str, Any]) -> types.Part:
    """`types.Part(function_call=types.FunctionCall(name=name, args=args))`."""
    return types.Part.model_construct(
        function_call=types.FunctionCall.model_construct(name=name, args=args)
    )


def response_part(call_id: str, name: str, response: dict[str, Any]) -> types.Part:
    """`types.Part(function_response=types.FunctionResponse(id=, name=, response=))`."""
    return types.Part.model_construct(
        function_response=types.FunctionResponse.model_construct(
            id=call_id, name=name, response=response
        )
    )


def content(role: str, parts: list[types.Part]) -> types.Content:
    """`types.Content(role=role, parts=parts)`."""
    return types.Content.model_construct(role=role, parts=parts)
