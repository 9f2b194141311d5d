"""Event streams: a message's invocation as it happens, and watching a session."""

# No `from __future__ import annotations`: FastAPI reads the route signatures, whose
# parameter types (the app names of this replica) are local to streams_router.

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from toolfleet.orchestrator.httpapi.api import HttpApi, RunItem
from toolfleet.orchestrator.httpapi.errors import COMMON_ERRORS, ApiError, documented
from toolfleet.orchestrator.httpapi.events import (
    EVENT_NAMES,
    PING,
    SseMessage,
    UpdateWriter,
    encode,
)
from toolfleet.orchestrator.httpapi.guards import Who
from toolfleet.orchestrator.httpapi.hub import InvocationFailed, StreamClosed
from toolfleet.orchestrator.httpapi.wire import APP, APP_PATTERN, SendMessage, SessionId, User
from toolfleet.orchestrator.loop.invocation import InvocationEnded

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# One Server-Sent Event (OpenAPI 3.1: a text/event-stream schema describes each event).
SSE_EVENT = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {"type": "string", "enum": list(EVENT_NAMES)},
        "id": {"type": "string"},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}
SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: " + ", ".join(EVENT_NAMES) + " (docs/guides/http.md).",
        "content": {"text/event-stream": {"schema": SSE_EVENT}},
    }
}


def streams_router(api: HttpApi) -> APIRouter:
    """The Server-Sent Events routes: a message's invocation as it runs, and watching a
    session (the invocations this replica runs or resumes for it)."""
    router = APIRouter(tags=["sessions"], responses=documented(*COMMON_ERRORS, 404))
    served = {"enum": sorted(api.orch.runners)}
    App = Annotated[str, Path(pattern=APP_PATTERN, description=APP, json_schema_extra=served)]
    base = "/apps/{app}/users/{user_id}/sessions"

    @router.post(
        base + "/{session_id}/messages/stream",
        response_class=StreamingResponse,
        responses={**SSE_RESPONSE, **documented(404, 409, 429, 502, 503)},
        summary="Send a message; receive the invocation's events as they happen",
    )
    async def stream_message(
        app: App, user_id: User, session_id: SessionId, body: SendMessage, caller: Who
    ) -> StreamingResponse:
        runner = api.runner(app)
        key = (await api.session(caller, app, user_id, session_id)).key
        release = api.hold_stream(caller)  # before the invocation starts: 429 runs nothing
        try:
            queue = api.start_invocation(runner, user_id, session_id, body.text)
            first = await queue.get()
            if isinstance(first, InvocationFailed):  # e.g. another invocation holds the session
                raise ApiError(first.status, first.detail)
        except BaseException:
            release()
            raise
        writer = UpdateWriter(session_id, api.tools.pools_of(app), api.settings)

        async def messages() -> AsyncIterator[SseMessage | None]:
            api.track(queue)
            try:
                item: RunItem | None = first
                while True:
                    if item is None:
                        yield None
                    elif isinstance(item, InvocationEnded):
                        pending = await api.store.pending_calls(key)
                        for message in writer.ending(item.invocation_id, pending, item.error):
                            yield message
                        return
                    elif isinstance(item, InvocationFailed):
                        yield writer.error(item.status, item.detail)
                        return
                    elif isinstance(item, StreamClosed):
                        yield writer.error(503, item.reason)
                        return
                    else:
                        for message in writer.messages(item):
                            yield message
                    item = await _next(queue, api.http.sse_ping_s)
            finally:
                api.untrack(queue)

        return _sse(messages(), release)

    @router.get(
        base + "/{session_id}/stream",
        response_class=StreamingResponse,
        responses={**SSE_RESPONSE, **documented(404, 429)},
        summary="Watch a session: the events of every invocation on this replica",
        description=(
            "Includes the invocations resumed when a ticket is completed, if this replica "
            "resumes them (run one replica, or route a session's clients to one replica; "
            "otherwise poll GET on the session)."
        ),
    )
    async def watch_session(
        app: App,
        user_id: User,
        session_id: SessionId,
        caller: Who,
        until_answer: Annotated[
            bool, Query(description="End the stream after the next `answer` or `error`.")
        ] = False,
    ) -> StreamingResponse:
        api.runner(app)  # 404 for an app not served
        key = (await api.session(caller, app, user_id, session_id)).key
        release = api.hold_stream(caller)
        subscription = api.hub.subscribe(key)  # before answering: nothing is missed
        writer = UpdateWriter(session_id, api.tools.pools_of(app), api.settings)

        async def messages() -> AsyncIterator[SseMessage | None]:
            try:
                while True:
                    item = await _next(subscription.queue, api.http.sse_ping_s)
                    if item is None:
                        yield None
                    elif isinstance(item, StreamClosed):
                        yield writer.error(503, item.reason)
                        return
                    elif isinstance(item, InvocationFailed):
                        yield writer.error(item.status, item.detail)
                        if until_answer:
                            return
                    else:
                        for message in writer.messages(item):
                            yield message
                        if isinstance(item, InvocationEnded):
                            pending = await api.store.pending_calls(key)
                            for message in writer.ending(item.invocation_id, pending, item.error):
                                yield message
                            if until_answer:
                                return
            finally:
                api.hub.unsubscribe(subscription)

        return _sse(messages(), release, comment=f"watching session {session_id}")

    return router


async def _next(queue: asyncio.Queue[Any], ping_s: float) -> Any:
    """The next item, or None when `ping_s` passed without one (send a keep-alive)."""
    try:
        return await asyncio.wait_for(queue.get(), ping_s)
    except TimeoutError:
        return None


class HeldStream(StreamingResponse):
    """A streaming response that gives its stream slot back when it ends, however it ends
    (finished, failed, or its client went away before the first byte)."""

    def __init__(self, body: AsyncIterator[bytes], release: Callable[[], None]) -> None:
        super().__init__(body, media_type="text/event-stream", headers=SSE_HEADERS)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream the events, then release the slot."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def _sse(
    messages: AsyncIterator[SseMessage | None], release: Callable[[], None], comment: str = ""
) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        if comment:
            yield f": {comment}\n\n".encode()
        event_id = 0
        async for message in messages:
            if message is None:
                yield PING
                continue
            event_id += 1
            yield encode(message[0], message[1], event_id)

    return HeldStream(body(), release)
