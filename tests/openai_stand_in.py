"""A local stand-in for an OpenAI-compatible chat server, for the real litellm client.

It answers POST /v1/chat/completions with queued replies (or, given a `responder`, with
replies computed from the request) and records every request, as tests/gemini_stand_in.py
does for Gemini. Replies are built with `text_reply` and `tool_calls_reply`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tests.local_http import Responder, StandIn, serve_stand_in

COMPLETIONS_PATH = "/v1/chat/completions"


@dataclass
class FakeOpenAI(StandIn):
    """Answers chat completions with queued replies, else the responder's; records requests."""

    @property
    def api_base(self) -> str:
        """What LiteLlm's `api_base` should be."""
        return f"http://127.0.0.1:{self.port}/v1"

    def serves(self, path: str) -> bool:
        """Only chat completions."""
        return path == COMPLETIONS_PATH

    def error(self, status: int, message: str) -> dict[str, Any]:
        """OpenAI's error body, with the type it gives that code."""
        return error_body(message, {404: "not_found", 409: "conflict"}[status])


@contextmanager
def serve_openai(responder: Responder | None = None) -> Iterator[FakeOpenAI]:
    """Serve a stand-in on a free loopback port for the duration of the block."""
    with serve_stand_in(FakeOpenAI, responder) as fake:
        yield fake


def error_body(message: str, kind: str) -> dict[str, Any]:
    """An OpenAI API error body."""
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def _completion(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stand-in",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-4o-stand-in",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


def text_reply(text: str) -> dict[str, Any]:
    """A completion whose answer is `text`."""
    return _completion({"role": "assistant", "content": text}, "stop")


def tool_calls_reply(*calls: tuple[str, str, dict[str, Any] | str]) -> dict[str, Any]:
    """A completion calling tools in parallel: (id, name, arguments) each; arguments as
    an object, or a string sent as it is."""
    return _completion(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for call_id, name, args in calls
            ],
        },
        "tool_calls",
    )
