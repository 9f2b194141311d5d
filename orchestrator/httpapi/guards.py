"""What stands before the routes: the bearer token, body size, and browser-origin checks."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolfleet.orchestrator.httpapi.errors import ApiError
from toolfleet.orchestrator.httpapi.settings import is_loopback

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="The token in TOOLFLEET_HTTP_TOKEN, as `Authorization: Bearer <token>`.",
)


def token_check(expected: str) -> Callable[..., Awaitable[None]]:
    """A dependency refusing requests without `Authorization: Bearer <expected>`."""
    wanted = expected.encode()

    async def check_token(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
    ) -> None:
        if credentials is None:
            raise ApiError(
                401,
                "authentication required: send the header `Authorization: Bearer <token>` "
                "with the token in TOOLFLEET_HTTP_TOKEN",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not hmac.compare_digest(credentials.credentials.encode(), wanted):
            raise ApiError(
                401, "the bearer token is not valid", headers={"WWW-Authenticate": "Bearer"}
            )

    return check_token


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail, "status": status}, status_code=status)


class BodyLimitMiddleware:
    """Answer 413 to a body over `max_bytes` (declared or streamed) before any route runs."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry: pass non-HTTP scopes through; answer 400 to a Content-Length that is not a
        number and 413 to a body over `max_bytes`; else read the whole body and replay it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None:
            if not declared.isdigit():
                await _error(400, "Content-Length is not a number")(scope, receive, send)
                return
            if int(declared) > self.max_bytes:
                await self._too_large(int(declared), scope, receive, send)
                return
        # Bodies here are small JSON documents: read one whole, then replay it.
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._too_large(len(body), scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed: Message = {"type": "http.request", "body": bytes(body), "more_body": False}
        await self.app(scope, _replay([replayed], receive), send)

    async def _too_large(self, size: int, scope: Scope, receive: Receive, send: Send) -> None:
        detail = (
            f"the request body is {'over ' if size > self.max_bytes else ''}{size} bytes; "
            f"the limit is {self.max_bytes} (TOOLFLEET_HTTP_MAX_BODY_BYTES)"
        )
        await _error(413, detail)(scope, receive, send)


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """Hand out `messages` first, then the real receive (which reports disconnects)."""
    queued = list(messages)

    async def replay() -> Message:
        return queued.pop(0) if queued else await receive()

    return replay


class OriginMiddleware:
    """Refuse what a web page on another site could make a browser send.

    - A state-changing request whose Origin is not this server's own (cross-site
      request forgery; the approvals page sends its requests from the same origin).
    - Without a token, a Host header that is not loopback: a page whose DNS name
      points at 127.0.0.1 (DNS rebinding) would otherwise reach the open API.
    """

    def __init__(self, app: ASGIApp, open_api: bool) -> None:
        self.app = app
        self.open_api = open_api

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry: answer 403 to a Host that is not loopback while the API is open, or to a
        state-changing request with a foreign Origin; pass everything else on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if self.open_api and not is_loopback(urlsplit(f"//{host}").hostname or ""):
            detail = (
                f"host {host!r} refused: without TOOLFLEET_HTTP_TOKEN the API answers only "
                "requests addressed to localhost"
            )
            await _error(403, detail)(scope, receive, send)
            return
        origin = headers.get("origin")
        unsafe = scope["method"] not in SAFE_METHODS
        if unsafe and origin is not None and urlsplit(origin).netloc.lower() != host.lower():
            await _error(403, f"cross-origin request from {origin!r} refused")(scope, receive, send)
            return
        await self.app(scope, receive, send)
