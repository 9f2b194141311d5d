"""A local stand-in for an OpenAI-compatible chat server, for the real litellm client.

It answers POST /v1/chat/completions with queued replies (or, given a `responder`, with
replies computed from the request) and records every request, as tests/gemini_stand_in.py
does for Gemini. Replies are built with `text_reply` and `tool_calls_reply`.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from tests.local_http import JsonHandler, serving

COMPLETIONS_PATH = "/v1/chat/completions"

Reply = tuple[int, dict[str, Any]]
Responder = Callable[[dict[str, Any]], Reply]


@dataclass
class Recorded:
    """One request as the stand-in received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeOpenAI:
    """Answers chat completions with queued replies, else the responder's; records requests."""

    port: int
    responder: Responder | None = None
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def api_base(self) -> str:
        """What LiteLlm's `api_base` should be."""
        return f"http://127.0.0.1:{self.port}/v1"

    def reply(self, body: dict[str, Any], status: int = 200) -> None:
        """Queue the answer to the next request."""
        self.replies.append((status, body))

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Reply:
        """Record the request and choose its answer."""
        with self.lock:
            self.requests.append(Recorded(path, headers, body))
            if path != COMPLETIONS_PATH:
                return 404, error_body(f"no route {path}", "not_found")
            if self.replies:
                return self.replies.popleft()
        if self.responder is not None:
            return self.responder(body)
        # A 4xx, so that an unexpected extra call fails at once without retries.
        return 409, error_body("script exhausted", "conflict")


class _Handler(JsonHandler):
    server: _Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status, reply = self.server.fake.answer(self.path, dict(self.headers.items()), body)
        self.reply(status, reply)


class _Server(ThreadingHTTPServer):
    fake: FakeOpenAI


@contextmanager
def serve_openai(responder: Responder | None = None) -> Iterator[FakeOpenAI]:
    """Serve a stand-in on a free loopback port for the duration of the block."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.fake = FakeOpenAI(port=server.server_address[1], responder=responder)
    with serving(server, 0.01):
        yield server.fake


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
