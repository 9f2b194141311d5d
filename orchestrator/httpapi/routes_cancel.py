"""Cancelling over HTTP: a session (what it has in flight, and its tickets) or one ticket."""

# No `from __future__ import annotations`: FastAPI reads the route signatures.

import asyncio
from typing import Annotated

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.orchestrator.httpapi.errors import COMMON_ERRORS, ApiError, documented
from toolfleet.orchestrator.httpapi.guards import Who
from toolfleet.orchestrator.httpapi.routes_confirmations import ticket_for_post
from toolfleet.orchestrator.httpapi.wire import (
    APP,
    APP_PATTERN,
    ID_PATTERN,
    REQUEST,
    Accepted,
    SessionId,
    User,
)
from toolfleet.shared.cancellation import cancel_session

App = Annotated[str, Path(pattern=APP_PATTERN, description=APP)]
CallId = Annotated[str, Path(pattern=ID_PATTERN, description="The pending call's id.")]


class CancelSession(BaseModel):
    """How to cancel a session."""

    model_config = REQUEST

    keep_tickets: bool = Field(
        default=False, description="Leave the session's pending tickets open."
    )


class SessionCancelled(BaseModel):
    """The cancellation was sent (202): the orchestrator running the session stops it."""

    session_id: str
    closing_tickets: list[str] = Field(
        description="Pending calls of the session being closed with a Cancelled error."
    )
    detail: str


def cancel_router(api: HttpApi) -> APIRouter:
    """`POST .../sessions/{session_id}/cancel` and `POST /tickets/{call_id}/cancel`."""
    router = APIRouter(responses=documented(*COMMON_ERRORS, 404))

    @router.post(
        "/apps/{app}/users/{user_id}/sessions/{session_id}/cancel",
        status_code=202,
        response_model=SessionCancelled,
        tags=["sessions"],
        summary="Cancel what the session has in flight",
        description=(
            "The orchestrator running the session stops its model call and its calls on "
            "the fleet (a prefork call is terminated, an io coroutine cancelled); each gets "
            "one Cancelled error response, and the session is left with no call without a "
            "response. Its pending tickets are closed unless keep_tickets."
        ),
    )
    async def cancel(
        app: App,
        user_id: User,
        session_id: SessionId,
        caller: Who,
        body: CancelSession | None = None,
    ) -> SessionCancelled:
        key = (await api.session(caller, app, user_id, session_id)).key
        keep = body.keep_tickets if body is not None else False
        closing = await asyncio.to_thread(
            cancel_session,
            api.orch.replica.sync_client(),
            api.keys,
            api.completions,
            key,
            keep_tickets=keep,
            source="http",
        )
        return SessionCancelled(
            session_id=session_id,
            closing_tickets=closing,
            detail="cancellation sent; what was in flight is answered with Cancelled errors",
        )

    @router.post(
        "/tickets/{call_id}/cancel",
        status_code=202,
        response_model=Accepted,
        tags=["tickets"],
        responses=documented(409),
        summary="Close one pending call as cancelled",
        description=(
            "Its final response is a Cancelled error, applied once (a call answered already "
            "answers 404 or 409), and the agent answers it as it would a result."
        ),
    )
    async def cancel_ticket(call_id: CallId, caller: Who) -> Accepted:
        call = await ticket_for_post(api, caller, call_id, {}, kind="cancel")
        if not (caller.owns_call(call) or caller.may_decide(call) or caller.may_post_result(call)):
            raise ApiError(403, f"{caller.subject!r} may not cancel ticket {call_id!r}")
        entry_id = await asyncio.to_thread(api.completions.cancel, call_id, source="http")
        return Accepted(
            call_id=call_id,
            session_id=call.session_id,
            final=True,
            entry_id=entry_id,
            detail="cancellation queued; the orchestrator applies it once and resumes the agent",
        )

    return router
