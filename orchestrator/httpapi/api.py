"""HttpApi: what the routes share - one orchestrator replica's runners, store and
ticket clients, and the invocations started over HTTP."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any

from google.genai import types

from toolfleet.orchestrator.connections import stop_task
from toolfleet.orchestrator.httpapi.callers import Caller
from toolfleet.orchestrator.httpapi.errors import ApiError, detail_of, status_of
from toolfleet.orchestrator.httpapi.hub import InvocationFailed, SessionHub, StreamClosed
from toolfleet.orchestrator.httpapi.identity import Authenticator
from toolfleet.orchestrator.httpapi.settings import HttpSettings
from toolfleet.orchestrator.httpapi.slots import StreamSlots
from toolfleet.orchestrator.httpapi.ticket_story import TicketStory
from toolfleet.orchestrator.httpapi.tool_lists import ToolLists
from toolfleet.orchestrator.loop.invocation import Update
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.service.orchestrator import Orchestrator
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.orchestrator.sessions.store import SessionStore
from toolfleet.shared.auth import CredentialStore
from toolfleet.shared.completions import KEPT_REFUSED_BYTES, Completions
from toolfleet.shared.confirmation import SERVED_SESSION_PREFIX, is_served_session
from toolfleet.shared.errors import CompletionError, SessionNotFoundError
from toolfleet.shared.keys import session_key
from toolfleet.shared.messages import PendingCall

log = logging.getLogger(__name__)

RunItem = Update | InvocationFailed | StreamClosed


class HttpApi:
    """`async with HttpApi(orch, hub, http) as api:` then serve `build_app(api)`.

    `hub` must be the Orchestrator's `on_update` (or be called from it), so that event
    streams see the invocations the completions listener resumes.
    """

    def __init__(self, orch: Orchestrator, hub: SessionHub, http: HttpSettings) -> None:
        self.orch = orch
        self.hub = hub
        self.http = http
        self.settings = orch.settings
        replica = orch.replica
        self.keys = replica.keys
        self.redis = replica.redis
        self.store: SessionStore = replica.store
        # The CLI's code path, run in a thread: the same checks and dead letters.
        sync_redis = replica.sync_client()
        # Any caller may post for any call id: a refused post keeps only a small response.
        self.completions = Completions.of(
            sync_redis, self.keys, self.settings, kept_refused_bytes=KEPT_REFUSED_BYTES
        )
        self.credentials = CredentialStore(sync_redis, self.keys, self.settings.credential_key)
        self._tasks: set[asyncio.Task[None]] = set()
        self._streams: set[asyncio.Queue[RunItem]] = set()
        self.authenticator = Authenticator(http)
        self.streams = StreamSlots(http.max_streams, http.max_streams_per_caller)
        self.tools = ToolLists(self.settings)
        # The words around pending tickets, by call id, as the ticket listing keeps them.
        self.ticket_stories: dict[str, TicketStory] = {}

    async def __aenter__(self) -> HttpApi:
        await self.tools.list_all({n: r.agent for n, r in self.orch.runners.items()})
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

    def close_streams(self) -> None:
        """End every open event stream (the server is stopping)."""
        self.hub.close()
        for queue in list(self._streams):
            queue.put_nowait(StreamClosed("the server is shutting down"))

    # What routes share.

    def runner(self, app_name: str) -> Runner:
        """The runner of app `app_name`; ApiError 404, naming the apps it serves, if this replica
        does not serve it."""
        runner = self.orch.runners.get(app_name)
        if runner is None:
            served = ", ".join(sorted(self.orch.runners))
            raise ApiError(404, f"unknown app {app_name!r}; this orchestrator serves: {served}")
        return runner

    def user(self, caller: Caller, user_id: str) -> None:
        """404 unless `caller` may act as `user_id`: another user's resources are answered
        as if they did not exist."""
        if not caller.owns(user_id):
            raise ApiError(404, f"unknown user {user_id!r}")

    def new_session(self, caller: Caller, user_id: str, session_id: str | None) -> None:
        """404 unless `caller` may act as `user_id`; 403 for a session id `toolfleet mcp
        serve` keeps its calls under (of user `mcp`), which no caller creates."""
        self.user(caller, user_id)
        if session_id is not None and is_served_session(user_id, session_id):
            raise ApiError(
                403,
                f"session ids starting {SERVED_SESSION_PREFIX!r} of user {user_id!r} are "
                "where `toolfleet mcp serve` keeps its calls: choose another id",
            )

    def session_of(self, caller: Caller, user_id: str, session_id: str) -> None:
        """404 unless `caller` may act in `user_id`'s session `session_id` (which may not
        exist): not in one `toolfleet mcp serve` keeps its calls in, unless an admin."""
        if not caller.owns_session(user_id, session_id):
            raise ApiError(404, f"unknown session {session_id!r} of user {user_id!r}")

    async def session(
        self, caller: Caller, app_name: str, user_id: str, session_id: str
    ) -> Session:
        """The session `session_id` of this app and user, 404 unless it exists and `caller`
        may act as that user. Only that user's: another user's session of the same id is
        another session, never read here."""
        self.runner(app_name)
        unknown = ApiError(404, f"unknown session {session_id!r} of user {user_id!r}")
        if not caller.owns_session(user_id, session_id):
            raise unknown
        try:
            return await self.store.get(session_key(app_name, user_id, session_id))
        except SessionNotFoundError:
            raise unknown from None

    async def ticket(self, caller: Caller, call_id: str) -> PendingCall:
        """The pending call, 404 unless it is pending and `caller` may see it (an admin is told
        why a call is not pending; others are not told whether it exists)."""
        try:
            call = await asyncio.to_thread(self.completions.get, call_id)
        except CompletionError as exc:
            raise ApiError(
                404, str(exc) if caller.admin else f"unknown ticket {call_id!r}"
            ) from exc
        if not caller.sees(call):
            raise ApiError(404, f"unknown ticket {call_id!r}")
        return call

    def hold_stream(self, caller: Caller) -> Callable[[], None]:
        """Take an event-stream slot for `caller` (ApiError 429 or 503 past a cap) for a
        response that outlives the route; call the answer, once, when the stream ends."""
        return self.streams.take(caller)

    def start_invocation(
        self,
        runner: Runner,
        user_id: str,
        session_id: str,
        message: str | types.Content,
        state_delta: dict[str, Any] | None = None,
    ) -> asyncio.Queue[RunItem]:
        """Run one invocation for `message` (text, or the user's Content) in the background,
        `state_delta` written with it; its updates go to the queue and the hub.

        It goes on when the client that asked for it disconnects.
        """
        out: asyncio.Queue[RunItem] = asyncio.Queue()
        task = asyncio.create_task(
            self._invoke(runner, user_id, session_id, message, state_delta, out),
            name=f"http-{session_id}",
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return out

    def track(self, queue: asyncio.Queue[RunItem]) -> None:
        """Register a message stream's queue, so that `close_streams` ends it at shutdown;
        `untrack` it when the stream ends."""
        self._streams.add(queue)

    def untrack(self, queue: asyncio.Queue[RunItem]) -> None:
        """Forget a stream's queue: its response ended or its client went away."""
        self._streams.discard(queue)

    async def _invoke(
        self,
        runner: Runner,
        user_id: str,
        session_id: str,
        message: str | types.Content,
        state_delta: dict[str, Any] | None,
        out: asyncio.Queue[RunItem],
    ) -> None:
        key = session_key(runner.app_name, user_id, session_id)
        run = runner.run(
            user_id=user_id, session_id=session_id, message=message, state_delta=state_delta
        )
        try:
            async for update in run:
                self.hub.publish(key, update)
                out.put_nowait(update)
        except asyncio.CancelledError:
            out.put_nowait(InvocationFailed(session_id, 503, "the server is shutting down"))
            raise
        except Exception as exc:
            status = status_of(exc)
            if status >= 500:
                log.exception("invocation of session %s failed", key)
            failure = InvocationFailed(session_id, status, detail_of(exc))
            self.hub.publish(key, failure)
            out.put_nowait(failure)
