"""Run an orchestrator replica with its HTTP API on uvicorn, in the caller's event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass

import uvicorn

from toolfleet.orchestrator.agents.agent import Agent
from toolfleet.orchestrator.completions.resumer import Notify
from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.orchestrator.httpapi.app import build_app
from toolfleet.orchestrator.httpapi.hub import SessionHub
from toolfleet.orchestrator.httpapi.settings import HttpSettings
from toolfleet.orchestrator.loop.invocation import Update
from toolfleet.orchestrator.models.protocol import Model
from toolfleet.orchestrator.plugins.base import BasePlugin
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError
from toolfleet.shared.keys import SessionKey

log = logging.getLogger(__name__)


TOKEN_IN_QUERY = re.compile(r"([?&]token=)[^&]*")


class HideTokens(logging.Filter):
    """Mask `?token=` (the approvals page's link) in uvicorn's access log lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask the token in the record's request path (uvicorn's third argument); drop nothing."""
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], TOKEN_IN_QUERY.sub(r"\1***", args[2]), *args[3:])
        return True


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The caller owns SIGINT/SIGTERM (`toolfleet serve` stops the orchestrator and
        # the server together); uvicorn would stop only itself, and re-raise them after.
        yield


@dataclass(frozen=True)
class RunningHttp:
    """What `serve_http` yields: the base URL with the port actually bound (port 0 picks one),
    the orchestrator, its HttpApi and the uvicorn server."""

    url: str
    orch: Orchestrator
    api: HttpApi
    server: uvicorn.Server


def listen(host: str, port: int) -> socket.socket:
    """A listening socket, bound before anything starts (port 0: a free one)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ConfigError(f"--http {host}:{port}: cannot resolve {host!r}: {exc}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--http {host}:{port}: cannot listen there: {exc}") from exc
    sock.setblocking(False)
    return sock


@contextlib.asynccontextmanager
async def serve_http(
    agents: Sequence[Agent],
    settings: Settings,
    http: HttpSettings,
    host: str,
    port: int,
    *,
    on_update: Notify | None = None,
    models: dict[str, Model] | None = None,
    plugins: Sequence[BasePlugin] = (),
) -> AsyncIterator[RunningHttp]:
    """`async with serve_http(...) as running:` serves until the block ends.

    Connections are accepted from the moment it yields (the socket listens already).
    """
    http.check(host)
    access_log = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, HideTokens) for f in access_log.filters):
        access_log.addFilter(HideTokens())
    sock = listen(host, port)
    hub = SessionHub()

    async def notify(session: SessionKey, update: Update) -> None:
        hub.publish(session, update)
        if on_update is not None:
            result = on_update(session, update)
            if result is not None:
                await result

    try:
        async with (
            Orchestrator(
                agents, settings, on_update=notify, models=models, plugins=plugins
            ) as orch,
            HttpApi(orch, hub, http) as api,
        ):
            config = uvicorn.Config(
                build_app(api),
                lifespan="off",
                # The client address is the peer's; AccessMiddleware alone reads X-Forwarded-For,
                # and only from TOOLFLEET_HTTP_TRUSTED_PROXIES.
                proxy_headers=False,
                log_config=None,
                server_header=False,
                http="h11",
                ws="none",
                timeout_graceful_shutdown=5,
            )
            server = _Server(config)
            task = asyncio.create_task(server.serve(sockets=[sock]), name="toolfleet-http")
            bound_host, bound_port = sock.getsockname()[:2]
            shown = f"[{bound_host}]" if ":" in bound_host else bound_host
            try:
                yield RunningHttp(f"http://{shown}:{bound_port}", orch, api, server)
            finally:
                api.close_streams()
                server.should_exit = True
                await task
    finally:
        sock.close()
