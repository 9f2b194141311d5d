"""Small HTTP servers the tests start on a free loopback port: JSON replies, quiet logs."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

# A status and a JSON body (bytes: JSON as it is sent).
Reply = tuple[int, dict[str, Any] | bytes]
Responder = Callable[[dict[str, Any]], Reply]


class JsonHandler(BaseHTTPRequestHandler):
    """A handler that answers JSON and logs nothing (the servers record requests instead)."""

    def reply(self, status: int, body: Any) -> None:
        """Send `body` as JSON with `status`; bytes are sent as they are (JSON written out,
        say, where json.dumps would recurse too deep)."""
        payload = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serving(server: ThreadingHTTPServer, poll_s: float = 0.05) -> Iterator[None]:
    """Serve on a thread of its own while the block runs; then shut down and close."""
    thread = threading.Thread(target=server.serve_forever, args=(poll_s,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@dataclass
class Recorded:
    """One request as a stand-in received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class StandIn:
    """A stand-in for a model's HTTP API: answers its route with queued replies, else the
    responder's, and records every request. Subclasses name the route and the API's
    error bodies."""

    port: int
    responder: Responder | None = None
    replies: deque[Reply] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def serves(self, path: str) -> bool:
        """Whether `path` is the API's route; others get 404."""
        raise NotImplementedError

    def error(self, status: int, message: str) -> dict[str, Any]:
        """The API's error body for `status` (404: no route, 409: no reply left)."""
        raise NotImplementedError

    def reply(self, body: dict[str, Any] | bytes, status: int = 200) -> None:
        """Queue the answer to the next request (bytes: JSON as it is sent)."""
        self.replies.append((status, body))

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Reply:
        """Record the request and choose its answer."""
        with self.lock:
            self.requests.append(Recorded(path, headers, body))
            if not self.serves(path):
                return 404, self.error(404, f"no route {path}")
            if self.replies:
                return self.replies.popleft()
        if self.responder is not None:
            return self.responder(body)
        # A 4xx, so that an unexpected extra call fails at once without retries.
        return 409, self.error(409, "script exhausted")


class _StandInHandler(JsonHandler):
    server: _StandInServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status, reply = self.server.stand_in.answer(self.path, dict(self.headers.items()), body)
        self.reply(status, reply)


class _StandInServer(ThreadingHTTPServer):
    stand_in: StandIn


S = TypeVar("S", bound=StandIn)


@contextmanager
def serve_stand_in(kind: type[S], responder: Responder | None = None) -> Iterator[S]:
    """Serve a stand-in of `kind` on a free loopback port for the duration of the block."""
    server = _StandInServer(("127.0.0.1", 0), _StandInHandler)
    stand_in = kind(port=server.server_address[1], responder=responder)
    server.stand_in = stand_in
    with serving(server, 0.01):
        yield stand_in
