"""A local HTTP API requiring a bearer token, for the tool-authentication tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class BankApi:
    url: str = ""
    valid_tokens: set[str] = field(default_factory=set)
    seen_tokens: list[str] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        api = self.server.api
        token = self.headers.get("Authorization", "").removeprefix("Bearer ")
        api.seen_tokens.append(token)
        if token not in api.valid_tokens:
            self._reply(401, {"error": "bad token"})
            return
        account = self.path.split("/")[2]
        self._reply(200, {"account_id": account, "balance": 1234.5, "currency": "EUR"})

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are recorded on BankApi instead


class _Server(ThreadingHTTPServer):
    api: BankApi


@contextmanager
def serve_bank_api() -> Iterator[BankApi]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.api = BankApi(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.api
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
