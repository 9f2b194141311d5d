"""A local stand-in for the Gemini REST API, for the real google-genai client.

It answers `generateContent` with queued replies (the adapter's own tests) or, given a
`responder`, with replies computed from the request: `scripted_responder` plays the
offline ScriptedModel of the asking agent, so the same scripts drive a program on
the offline model and through the real SDK over HTTP. It records every request.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from google.genai import types

from tests.local_http import JsonHandler, serving
from toolfleet.orchestrator.models.offline import ScriptedModel
from toolfleet.orchestrator.models.protocol import ModelRequest
from toolfleet.shared.errors import ModelError

# google-genai 3.x sends /v1/...; older releases sent /v1beta/...
GENERATE_PATH = re.compile(r"^/v1(?:beta)?/models/(?P<model>[^/:?]+):generateContent$")
# The line toolfleet (as ADK) adds to every agent's system instruction.
AGENT_NAME = re.compile(r'Your internal name is "(?P<name>[^"]+)"')

Reply = tuple[int, dict[str, Any] | bytes]
Responder = Callable[[dict[str, Any]], Reply]


@dataclass
class Recorded:
    """One request as the stand-in received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeGemini:
    """Answers generateContent with queued replies, else the responder's; records requests."""

    port: int
    responder: Responder | None = None
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        """Where the SDK should send its requests (GOOGLE_GEMINI_BASE_URL)."""
        return f"http://127.0.0.1:{self.port}"

    def reply(self, body: dict[str, Any] | bytes, status: int = 200) -> None:
        """Queue the answer to the next request (bytes: JSON as it is sent)."""
        self.replies.append((status, body))

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Reply:
        """Record the request and choose its answer."""
        with self.lock:
            self.requests.append(Recorded(path, headers, body))
            if not GENERATE_PATH.match(path):
                return 404, error_body(404, f"no route {path}", "NOT_FOUND")
            if self.replies:
                return self.replies.popleft()
        if self.responder is not None:
            return self.responder(body)
        # A 4xx, so that an unexpected extra call fails at once without retries.
        return 409, error_body(409, "script exhausted", "ABORTED")


class _Handler(JsonHandler):
    server: _Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status, reply = self.server.fake.answer(self.path, dict(self.headers.items()), body)
        self.reply(status, reply)


class _Server(ThreadingHTTPServer):
    fake: FakeGemini


@contextmanager
def serve_gemini(responder: Responder | None = None) -> Iterator[FakeGemini]:
    """Serve a stand-in on a free loopback port for the duration of the block."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.fake = FakeGemini(port=server.server_address[1], responder=responder)
    with serving(server, 0.01):
        yield server.fake


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
        return "user"
    called = {p.function_call.name for p in content.parts or () if p.function_call}
    return agent if called <= offered else "another agent"
