"""Small HTTP servers the tests start on a free loopback port: JSON replies, quiet logs."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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
