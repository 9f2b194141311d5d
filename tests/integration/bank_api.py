"""A local HTTP API requiring a bearer token, for the tool-authentication tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer

from tests.local_http import JsonHandler, serving


@dataclass
class BankApi:
    url: str = ""
    valid_tokens: set[str] = field(default_factory=set)
    seen_tokens: list[str] = field(default_factory=list)


class _Handler(JsonHandler):
    server: _Server

    def do_GET(self) -> None:
        api = self.server.api
        token = self.headers.get("Authorization", "").removeprefix("Bearer ")
        api.seen_tokens.append(token)
        if token not in api.valid_tokens:
            self.reply(401, {"error": "bad token"})
            return
        account = self.path.split("/")[2]
        self.reply(200, {"account_id": account, "balance": 1234.5, "currency": "EUR"})


class _Server(ThreadingHTTPServer):
    api: BankApi


@contextmanager
def serve_bank_api() -> Iterator[BankApi]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.api = BankApi(url=f"http://127.0.0.1:{server.server_address[1]}")
    with serving(server):
        yield server.api
