"""A model's function-call arguments nested over TOOLFLEET_MAX_JSON_DEPTH: dropped from its
turn as it arrives, and the call answered with an error the model can act on.

The turn is stored, shown and sent back to the model; each of those serializes it, and
would fail (or recurse past Python's limit) on arguments nested deeply enough. So such
arguments never get that far: the turn keeps a short note in their place, and a call
whose arguments hold that note is refused whenever it is answered (a resumed turn too).

Arguments over TOOLFLEET_MAX_PAYLOAD_BYTES are refused as well, on every path that
sends a call (an agent's turn, `toolfleet mcp serve`).
"""

from __future__ import annotations

from typing import Any

from google.genai import types
from pydantic_core import to_json

from toolfleet.shared.json_depth import TOO_DEEP_KEY, dropped, too_deep, value_depth

# The note kept in place of arguments that are not a JSON object (Gemini's SDK checks
# that they are; another model's adapter, or a callback that builds a call, may not).
NOT_OBJECT_KEY = "$not_an_object"


def drop_deep_args(content: types.Content, limit: int) -> None:
    """Replace, in place, the arguments of each call of `content` nested over `limit`
    levels, or that are not an object, by a note saying so."""
    for part in content.parts or ():
        call = part.function_call
        if call is None or not call.args:
            continue
        if not isinstance(call.args, dict):
            call.args = {NOT_OBJECT_KEY: _not_object(call.name or "")}
        elif value_depth(call.args, stop_above=limit) > limit:
            call.args = dropped(_message(call.name or "", limit))


def deep_args_problem(tool: str, args: dict[str, Any], limit: int) -> str | None:
    """Why the call of `tool` with `args` may not run for their nesting, or None: they
    nest over `limit` levels, or were dropped from the turn for that (the model may not
    forge the note either: it is refused the same way)."""
    if NOT_OBJECT_KEY in args:
        return _not_object(tool)
    if TOO_DEEP_KEY in args or value_depth(args, stop_above=limit) > limit:
        return _message(tool, limit)
    return None


def large_args_problem(args: dict[str, Any], limit: int) -> str | None:
    """Why a call with `args` may not run for their size, or None: their JSON, as sent
    (UTF-8), is over `limit` bytes."""
    size = len(to_json(args, fallback=str))
    if size > limit:
        return (
            f"the arguments are {size} bytes, over the {limit}-byte limit; pass less data "
            "(or a reference to it)"
        )
    return None


def _not_object(tool: str) -> str:
    return f"the arguments of {tool!r} are not a JSON object; the call was not run: pass an object"


def _message(tool: str, limit: int) -> str:
    return (
        f"{too_deep(f'the arguments of {tool!r}', limit)}; the call was not run and its "
        "arguments were not kept: pass flatter arguments"
    )
