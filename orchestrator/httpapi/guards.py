"""What stands before the routes: the caller's identity, body size, the peer and
browser-origin checks."""

from __future__ import annotations

import ipaddress
import json
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolfleet.orchestrator.httpapi.callers import Caller
from toolfleet.orchestrator.httpapi.identity import Authenticator
from toolfleet.orchestrator.httpapi.settings import is_loopback
from toolfleet.shared.json_depth import (
    DEFAULT_MAX_JSON_DEPTH,
    ENVELOPE_LEVELS,
    text_depth,
    too_deep,
)

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="An API key, a JWT, or the operator's token (TOOLFLEET_HTTP_TOKEN), as "
    "`Authorization: Bearer <token>`.",
)


async def current_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> Caller:
    """The request's Caller, by the app's Authenticator (`app.state.authenticator`); 401 when
    it cannot be identified. FastAPI runs it once a request, however many routes ask."""
    authenticator: Authenticator = request.app.state.authenticator
    return await authenticator.caller(credentials.credentials if credentials else None)


# What a route declares to know its caller.
Who = Annotated[Caller, Depends(current_caller)]


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail, "status": status}, status_code=status)


class BodyLimitMiddleware:
    """Answer 413 to a body over `max_bytes` (declared or streamed), and 422 to one nested
    deeper than `max_depth` (TOOLFLEET_MAX_JSON_DEPTH) plus the body's own levels around
    the value it carries, before any route runs: parsing it would recurse that deep."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, max_depth: int = DEFAULT_MAX_JSON_DEPTH
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry: pass non-HTTP scopes through; answer 400 to a Content-Length that is not a
        number and 413 to a body over `max_bytes`; else read the whole body and replay it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None:
            if not (declared.isascii() and declared.isdigit()):  # "²" is a digit to Python
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
        deepest = self.max_depth + ENVELOPE_LEVELS
        if text_depth(body, stop_above=deepest) > deepest:
            detail = too_deep("the request body", self.max_depth, ENVELOPE_LEVELS)
            await _error(422, detail)(scope, receive, send)
            return
        if _non_finite(bytes(body)):
            await _error(422, NON_FINITE)(scope, receive, send)
            return
        replayed: Message = {"type": "http.request", "body": bytes(body), "more_body": False}
        await self.app(scope, _replay([replayed], receive), send)

    async def _too_large(self, size: int, scope: Scope, receive: Receive, send: Send) -> None:
        detail = (
            f"the request body is {'over ' if size > self.max_bytes else ''}{size} bytes; "
            f"the limit is {self.max_bytes} (TOOLFLEET_HTTP_MAX_BODY_BYTES)"
        )
        await _error(413, detail)(scope, receive, send)


NON_FINITE = (
    "the request body holds NaN or Infinity, which JSON has no numbers for: send null, a "
    "string, or a finite number"
)


class _NonFinite(ValueError):
    """A JSON text names NaN or an infinity."""


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)


def _non_finite(body: bytes) -> bool:
    """Whether JSON `body` holds NaN, Infinity or -Infinity as a number: Python's parser
    takes them, and the value would be stored where no JSON reader can read it back. Text
    that is not JSON is the route's to refuse."""
    if b"NaN" not in body and b"Infinity" not in body:  # the common body: not parsed twice
        return False
    try:
        json.loads(body, parse_constant=_refuse_constant)
    except _NonFinite:
        return True
    except ValueError:  # not JSON (nor UTF-8): not this check's to answer
        return False
    return False


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """Hand out `messages` first, then the real receive (which reports disconnects)."""
    queued = list(messages)

    async def replay() -> Message:
        return queued.pop(0) if queued else await receive()

    return replay


class TrustedProxies:
    """The proxies whose X-Forwarded-* headers are believed (TOOLFLEET_HTTP_TRUSTED_PROXIES)."""

    def __init__(self, entries: list[str]) -> None:
        self._networks = [ipaddress.ip_network(e, strict=False) for e in entries]

    def trusts(self, address: str | None) -> bool:
        """True when `address` is one of the configured proxies."""
        if address is None or not self._networks:
            return False
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self._networks)

    def client_of(self, peer: str | None, headers: Headers) -> str | None:
        """The client's address: the peer's, or behind trusted proxies the nearest address in
        X-Forwarded-For that is not one of them (entries further left are the client's say)."""
        if not self.trusts(peer):
            return peer
        hops = [h.strip() for h in ",".join(headers.getlist("x-forwarded-for")).split(",")]
        for hop in reversed([h for h in hops if h]):
            if not self.trusts(hop):
                return hop
        return peer


class AccessMiddleware:
    """Who may reach the API at all, and what a web page on another site may not make a
    browser send.

    - Without caller identities (no token, API keys or JWTs) the API answers only
      loopback clients, judged by the peer address (or, from a trusted proxy, by
      X-Forwarded-For), never by the Host header; with TOOLFLEET_HTTP_ALLOW_NO_AUTH the
      trusted proxies, which authenticate, are let in too.
    - Without identities, a direct request must also name a loopback Host: a page whose
      DNS name points at 127.0.0.1 (DNS rebinding) would otherwise reach the open API.
    - A state-changing request whose Origin is not this server's own is refused (cross-site
      request forgery; the approvals page sends its requests from the same origin).
    """

    def __init__(
        self, app: ASGIApp, open_api: bool, proxies: TrustedProxies, allow_proxies: bool
    ) -> None:
        self.app = app
        self.open_api = open_api
        self.proxies = proxies
        self.allow_proxies = allow_proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry: answer 403 to a client an open API does not serve, or to a
        state-changing request with a foreign Origin; pass everything else on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        peer = scope["client"][0] if scope.get("client") else None
        via_proxy = self.proxies.trusts(peer)
        refusal = self._refusal(peer, via_proxy, headers) if self.open_api else None
        if refusal is not None:
            await _error(403, refusal)(scope, receive, send)
            return
        host = headers.get("x-forwarded-host") if via_proxy else None
        host = host or headers.get("host", "")
        origin = headers.get("origin")
        unsafe = scope["method"] not in SAFE_METHODS
        if unsafe and origin is not None and urlsplit(origin).netloc.lower() != host.lower():
            await _error(403, f"cross-origin request from {origin!r} refused")(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, peer: str | None, via_proxy: bool, headers: Headers) -> str | None:
        """Why an open API refuses this request, or None to serve it."""
        if via_proxy and self.allow_proxies:
            return None
        client = self.proxies.client_of(peer, headers)
        if client is None or not is_loopback(client):
            return (
                f"client {client!r} refused: without caller identities (TOOLFLEET_HTTP_TOKEN, "
                "TOOLFLEET_HTTP_API_KEYS or JWTs) the API answers only loopback clients"
            )
        host = headers.get("host", "")
        if not via_proxy and not is_loopback(urlsplit(f"//{host}").hostname or ""):
            return (
                f"host {host!r} refused: without caller identities the API answers only "
                "requests addressed to localhost"
            )
        return None


class NoFramingMiddleware:
    """Tell browsers never to show a response inside another site's frame: a page there
    could lay its own over the dev UI's, the docs' or the approvals page's buttons and
    have a person click them (clickjacking), with the server's own origin. The server's
    own pages may still frame one another."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry: add `X-Frame-Options: SAMEORIGIN` to every HTTP response."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_unframed(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).setdefault("X-Frame-Options", "SAMEORIGIN")
            await send(message)

        await self.app(scope, receive, send_unframed)
