"""Apps, sessions, and messages (answered as JSON or as a stream of events)."""

# No `from __future__ import annotations`: FastAPI reads the route signatures, whose
# parameter types (the app names of this replica) are local to sessions_router.

import json
from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import Field

from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.orchestrator.httpapi.errors import COMMON_ERRORS, ApiError, documented
from toolfleet.orchestrator.httpapi.events import event_json
from toolfleet.orchestrator.httpapi.guards import Who
from toolfleet.orchestrator.httpapi.hub import InvocationFailed, StreamClosed
from toolfleet.orchestrator.httpapi.wire import (
    APP,
    APP_PATTERN,
    AppOut,
    CreateSession,
    MessageResult,
    SendMessage,
    SessionId,
    SessionOut,
    SessionSummary,
    Ticket,
    ToolOut,
    User,
    Whoami,
)
from toolfleet.orchestrator.loop.invocation import InvocationEnded
from toolfleet.orchestrator.sessions.events import Event, answer_of
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.celery_config import tool_pool
from toolfleet.shared.keys import session_key
from toolfleet.shared.redaction import redact_deep


def sessions_router(api: HttpApi) -> APIRouter:
    """Routes of `/apps` and of sessions: create, list, read, and send a message answered as
    JSON (optionally waiting for its tickets).

    The `app` path parameter's schema lists the apps this replica serves."""
    router = APIRouter(tags=["sessions"], responses=documented(*COMMON_ERRORS, 404))
    served = {"enum": sorted(api.orch.runners)}
    App = Annotated[str, Path(pattern=APP_PATTERN, description=APP, json_schema_extra=served)]
    base = "/apps/{app}/users/{user_id}/sessions"
    names = api.settings.secret_arg_names
    max_wait_s = api.http.max_wait_s

    class MessageAndWait(SendMessage):
        wait_for_tickets_s: float = Field(
            default=0.0,
            ge=0,
            le=max_wait_s,
            description="Also wait up to this long (TOOLFLEET_HTTP_MAX_WAIT_S at most) for "
            "pending tickets to be completed and answered; 0 returns when the invocation ends.",
        )

    def session_out(session: Session, pending: list[Ticket]) -> SessionOut:
        return SessionOut(
            id=session.id,
            app_name=session.app_name,
            user_id=session.user_id,
            active_agent=getattr(session, "active_agent", None),
            state=redact_deep(session.state, names),  # sealed or clear: shown as ***
            events=[event_json(e, names) for e in session.events],
            pending=pending,
        )

    async def tickets_of(session: Session) -> list[Ticket]:
        return [Ticket.of(c, names) for c in await api.store.pending_calls(session.key)]

    @router.get("/me", response_model=Whoami, summary="Who the bearer token says you are")
    async def whoami(caller: Who) -> Whoami:
        return Whoami(subject=caller.subject, roles=caller.roles)

    @router.get("/apps", response_model=list[AppOut], summary="The agents this replica serves")
    async def list_apps() -> list[AppOut]:
        out = []
        for name, runner in sorted(api.orch.runners.items()):
            tools = [
                ToolOut(
                    name=t.name, pool=tool_pool(t, api.settings), long_running=t.is_long_running
                )
                for t in api.tools.of(name)
            ]
            out.append(AppOut(name=name, description=runner.agent.description, tools=tools))
        return out

    @router.post(
        base,
        status_code=201,
        response_model=SessionOut,
        responses=documented(404, 409),
        summary="Create a session",
    )
    async def create_session(
        app: App, user_id: User, caller: Who, body: CreateSession | None = None
    ) -> SessionOut:
        api.runner(app)
        session_id = body.session_id if body else None
        api.new_session(caller, user_id, session_id)
        session = await api.store.create(app, user_id, session_id)
        return session_out(session, [])

    @router.get(base, response_model=list[SessionSummary], summary="A user's sessions")
    async def list_sessions(app: App, user_id: User, caller: Who) -> list[SessionSummary]:
        api.runner(app)
        api.user(caller, user_id)
        raw_ids = await api.redis.smembers(api.keys.user_sessions(app, user_id))
        ids = sorted(i.decode() if isinstance(i, bytes) else str(i) for i in raw_ids)
        pipe = api.redis.pipeline(transaction=False)
        for session_id in ids:
            key = session_key(app, user_id, session_id)
            pipe.hget(api.keys.session(key), "created_at")
            pipe.llen(api.keys.events(key))
            pipe.lindex(api.keys.events(key), -1)
        replies = await pipe.execute()
        keys = [session_key(app, user_id, session_id) for session_id in ids]
        pending = dict(zip(ids, await api.store.pending_counts(keys), strict=True))
        out, expired = [], []
        for i, session_id in enumerate(ids):
            created, count, last = replies[3 * i : 3 * i + 3]
            if created is None:  # expired (TOOLFLEET_SESSION_TTL_S): forget its id
                expired.append(session_id)
                continue
            out.append(
                SessionSummary(
                    id=session_id,
                    app_name=app,
                    user_id=user_id,
                    created_at=float(created) if created is not None else None,
                    events=int(count),
                    last_event_at=json.loads(last).get("timestamp") if last else None,
                    pending=pending.get(session_id, 0),
                )
            )
        if expired:
            await api.redis.srem(api.keys.user_sessions(app, user_id), *expired)
        return sorted(out, key=lambda s: s.last_event_at or s.created_at or 0.0, reverse=True)

    @router.get(
        base + "/{session_id}",
        response_model=SessionOut,
        responses=documented(404),
        summary="A session: its events, state and open tickets",
    )
    async def get_session(
        app: App, user_id: User, session_id: SessionId, caller: Who
    ) -> SessionOut:
        session = await api.session(caller, app, user_id, session_id)
        return session_out(session, await tickets_of(session))

    @router.post(
        base + "/{session_id}/messages",
        response_model=MessageResult,
        responses=documented(404, 409, 502, 503),
        summary="Send a message and wait for the agent's answer",
    )
    async def send_message(
        app: App, user_id: User, session_id: SessionId, body: MessageAndWait, caller: Who
    ) -> MessageResult:
        runner = api.runner(app)
        key = (await api.session(caller, app, user_id, session_id)).key
        queue = api.start_invocation(runner, user_id, session_id, body.text)
        answer, invocation_id = "", ""
        error: str | None = None
        while True:
            item = await queue.get()
            if isinstance(item, InvocationFailed | StreamClosed):
                status = item.status if isinstance(item, InvocationFailed) else 503
                detail = item.detail if isinstance(item, InvocationFailed) else item.reason
                raise ApiError(status, detail)
            if isinstance(item, InvocationEnded):
                invocation_id = item.invocation_id
                break
            if isinstance(item, Event) and item.author != "user" and answer_of(item):
                answer = answer_of(item)
            if isinstance(item, Event) and item.error:
                error = item.error
        pending = await api.store.pending_calls(key)
        if pending and body.wait_for_tickets_s > 0:
            await api.orch.wait_until_settled(key, body.wait_for_tickets_s)
            answer = _last_answer(await api.store.get(key)) or answer
            pending = await api.store.pending_calls(key)
        owed = key in await api.store.sessions_to_resume()
        return MessageResult(
            session_id=session_id,
            invocation_id=invocation_id,
            answer=answer,
            error=error,
            pending=[Ticket.of(c, names) for c in pending],
            settled=not pending and not owed,
        )

    return router


def _last_answer(session: Session) -> str:
    for event in reversed(session.events):
        if event.author != "user" and answer_of(event):
            return answer_of(event)
    return ""
