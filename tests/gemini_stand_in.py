"""A local stand-in for the Gemini REST API, for the real google-genai client.

It answers `generateContent` with queued replies (the adapter's own tests) or, given a
`responder`, with replies computed from the request: `scripted_responder` plays the
offline ScriptedModel of the asking agent, so the same scripts drive a program on
the offline model and through the real SDK over HTTP. It records every request.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from google.genai import types

from tests.local_http import Reply, Responder, StandIn, serve_stand_in
from toolfleet.orchestrator.loop.foreign import PREAMBLE
from toolfleet.orchestrator.models.offline import ScriptedModel
from toolfleet.orchestrator.models.protocol import ModelRequest
from toolfleet.shared.errors import ModelError

# google-genai 3.x sends /v1/...; older releases sent /v1beta/...
GENERATE_PATH = re.compile(r"^/v1(?:beta)?/models/(?P<model>[^/:?]+):generateContent$")
# The line toolfleet (as ADK) adds to every agent's system instruction.
AGENT_NAME = re.compile(r'Your internal name is "(?P<name>[^"]+)"')


@dataclass
class FakeGemini(StandIn):
    """Answers generateContent with queued replies, else the responder's; records requests."""

    @property
    def base_url(self) -> str:
        """Where the SDK should send its requests (GOOGLE_GEMINI_BASE_URL)."""
        return f"http://127.0.0.1:{self.port}"

    def serves(self, path: str) -> bool:
        """Only generateContent, under any model."""
        return GENERATE_PATH.match(path) is not None

    def error(self, status: int, message: str) -> dict[str, Any]:
        """Gemini's error body, with the status name it gives that code."""
        return error_body(status, message, {404: "NOT_FOUND", 409: "ABORTED"}[status])


@contextmanager
def serve_gemini(responder: Responder | None = None) -> Iterator[FakeGemini]:
    """Serve a stand-in on a free loopback port for the duration of the block."""
    with serve_stand_in(FakeGemini, responder) as fake:
        yield fake


def error_body(code: int, message: str, status: str) -> dict[str, Any]:
    """A Gemini API error body."""
    return {"error": {"code": code, "message": message, "status": status}}


def scripted_responder(models: Mapping[str, ScriptedModel]) -> Responder:
    """Answer each request with the step of the asking agent's script.

    The agent is named by its system instruction. Which model turns were its own (the
    script's step counts them) is read off the calls: a turn calling only functions
    offered to this agent is its own, like a turn of text.
    """

    def respond(body: dict[str, Any]) -> Reply:
        instruction = "".join(
            part.get("text", "") for part in body.get("systemInstruction", {}).get("parts", [])
        )
        found = AGENT_NAME.search(instruction)
        if found is None or found["name"] not in models:
            name = found["name"] if found else None
            return 400, error_body(400, f"no script for agent {name!r}", "INVALID_ARGUMENT")
        name = found["name"]
        contents = [types.Content.model_validate(c) for c in body.get("contents", [])]
        offered = {
            d["name"] for t in body.get("tools", []) for d in t.get("functionDeclarations", [])
        }
        request = ModelRequest(
            agent_name=name,
            instruction=instruction,
            contents=contents,
            tools=[],
            authors=[_author(c, name, offered) for c in contents],
        )
        try:
            content = asyncio.run(models[name].generate(request))
        except ModelError as exc:
            return 400, error_body(400, str(exc), "INVALID_ARGUMENT")
        return 200, {
            "candidates": [
                {
                    "content": content.model_dump(mode="json", by_alias=True, exclude_none=True),
                    "finishReason": "STOP",
                }
            ]
        }

    return respond


def _author(content: types.Content, agent: str, offered: set[str]) -> str:
    if content.role != "model":
        parts = content.parts or ()
        # Another agent's turn, shown to this one as "For context:" user text.
        return "another agent" if parts and parts[0].text == PREAMBLE else "user"
    called = {p.function_call.name for p in content.parts or () if p.function_call}
    return agent if called <= offered else "another agent"
