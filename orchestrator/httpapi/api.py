"""HttpApi: the FastAPI application over one orchestrator replica, and what routes share."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from importlib import resources
from types import TracebackType

import redis
from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from orchestrator.connections import command_client, stop_task
from orchestrator.httpapi.errors import ApiError, detail_of, install_error_handlers, status_of
from orchestrator.httpapi.guards import BodyLimitMiddleware, OriginMiddleware, token_check
from orchestrator.httpapi.hub import InvocationFailed, SessionHub, StreamClosed
from orchestrator.httpapi.settings import HttpSettings
from orchestrator.loop import Update
from orchestrator.runner import Runner
from orchestrator.service import Orchestrator
from orchestrator.sessions import Session, SessionStore
from shared.auth import CredentialStore
from shared.completions import Completions
from shared.keys import Keys

log = logging.getLogger(__name__)

STATIC = resources.files("orchestrator.httpapi") / "static"


@dataclass(frozen=True)
class InvocationDone:
    invocation_id: str


RunItem = Update | InvocationDone | InvocationFailed | StreamClosed


class HttpApi:
    """`async with HttpApi(orch, hub, http) as api:` then serve `api.app` (see serving.py).

    `hub` must be the Orchestrator's `on_update` (or be called from it), so that event
    streams see the invocations the completions listener resumes.
    """

    def __init__(self, orch: Orchestrator, hub: SessionHub, http: HttpSettings) -> None:
        self.orch = orch
        self.hub = hub
        self.http = http
        self.settings = orch.settings
        self.keys = Keys(self.settings.key_prefix)
        url = self.settings.require_redis_url()
        self.redis = command_client(url)
        self.store = SessionStore(self.redis, self.keys)
        # The CLI's own client, run in a thread: the same checks and dead letters.
        self._sync_redis = redis.Redis.from_url(url)
        self.completions = Completions(self._sync_redis, self.keys)
        self.credentials = CredentialStore(
            self._sync_redis, self.keys, self.settings.credential_key
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._streams: set[asyncio.Queue[RunItem]] = set()
        self.app = self._build()

    async def __aenter__(self) -> HttpApi:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close_streams()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=self.http.shutdown_grace_s)
        for task in list(self._tasks):
            log.warning("cancelling an unfinished invocation at shutdown")
            await stop_task(task, 5.0)
        await self.redis.aclose()
        self._sync_redis.close()

    def close_streams(self) -> None:
        """End every open event stream (the server is stopping)."""
        self.hub.close()
        for queue in list(self._streams):
            queue.put_nowait(StreamClosed("the server is shutting down"))

    # What routes share.

    def runner(self, app_name: str) -> Runner:
        runner = self.orch.runners.get(app_name)
        if runner is None:
            served = ", ".join(sorted(self.orch.runners))
            raise ApiError(404, f"unknown app {app_name!r}; this orchestrator serves: {served}")
        return runner

    async def session(self, app_name: str, user_id: str, session_id: str) -> Session:
        """The session, 404 unless it exists and belongs to this app and user."""
        self.runner(app_name)
        session = await self.store.get(session_id) if await self._exists(session_id) else None
        if session is None or session.app_name != app_name or session.user_id != user_id:
            raise ApiError(404, f"unknown session {session_id!r} of user {user_id!r}")
        return session

    async def _exists(self, session_id: str) -> bool:
        return bool(await self.redis.exists(self.keys.session(session_id)))

    def start_invocation(
        self, runner: Runner, user_id: str, session_id: str, text: str
    ) -> asyncio.Queue[RunItem]:
        """Run one invocation in the background; its updates go to the queue and the hub.

        It goes on when the client that asked for it disconnects.
        """
        out: asyncio.Queue[RunItem] = asyncio.Queue()
        task = asyncio.create_task(
            self._invoke(runner, user_id, session_id, text, out), name=f"http-{session_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return out

    def track(self, queue: asyncio.Queue[RunItem]) -> None:
        self._streams.add(queue)

    def untrack(self, queue: asyncio.Queue[RunItem]) -> None:
        self._streams.discard(queue)

    async def _invoke(
        self,
        runner: Runner,
        user_id: str,
        session_id: str,
        text: str,
        out: asyncio.Queue[RunItem],
    ) -> None:
        invocation_id = ""
        try:
            async for update in runner.run(user_id=user_id, session_id=session_id, message=text):
                invocation_id = invocation_id or update.invocation_id
                self.hub.publish(session_id, update)
                out.put_nowait(update)
        except asyncio.CancelledError:
            out.put_nowait(InvocationFailed(session_id, 503, "the server is shutting down"))
            raise
        except Exception as exc:
            status = status_of(exc)
            if status >= 500:
                log.exception("invocation of session %s failed", session_id)
            failure = InvocationFailed(session_id, status, detail_of(exc))
            self.hub.publish(session_id, failure)
            out.put_nowait(failure)
        else:
            out.put_nowait(InvocationDone(invocation_id))

    def _build(self) -> FastAPI:
        from orchestrator.httpapi.routes_sessions import sessions_router
        from orchestrator.httpapi.routes_streams import streams_router
        from orchestrator.httpapi.routes_tickets import health_router, tickets_router

        app = FastAPI(
            title="toolfleet",
            version="0.1.0",
            description=(
                "Sessions, messages with their events as Server-Sent Events, long-running "
                "tickets and their completion, and health, of one orchestrator replica. "
                "Every error is JSON `{detail, status}`."
            ),
        )
        install_error_handlers(app)
        auth = []
        if self.http.auth_required() and self.http.token is not None:
            auth = [Depends(token_check(self.http.token.get_secret_value()))]
        app.include_router(sessions_router(self), dependencies=auth)
        app.include_router(streams_router(self), dependencies=auth)
        app.include_router(tickets_router(self), dependencies=auth)
        app.include_router(health_router(self))
        app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

        @app.get("/", include_in_schema=False)
        async def index() -> RedirectResponse:
            return RedirectResponse("approvals")

        @app.get("/approvals", include_in_schema=False)
        async def approvals_page() -> HTMLResponse:
            html = (STATIC / "approvals.html").read_text(encoding="utf-8")
            return HTMLResponse(html, headers=PAGE_HEADERS)

        app.add_middleware(OriginMiddleware, open_api=not self.http.auth_required())
        app.add_middleware(BodyLimitMiddleware, max_bytes=self.http.max_body_bytes)
        return app


# The page loads only its own script and style, and talks only to this server.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
