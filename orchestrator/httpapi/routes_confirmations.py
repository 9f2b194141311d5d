"""`POST /tickets/{call_id}/confirmation`: a person confirms or rejects a call that waits
for it (FunctionTool(require_confirmation=...), tool_context.request_confirmation)."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path

from toolfleet.orchestrator.httpapi.api import HttpApi
from toolfleet.orchestrator.httpapi.callers import Caller
from toolfleet.orchestrator.httpapi.errors import COMMON_ERRORS, ApiError, documented
from toolfleet.orchestrator.httpapi.guards import Who
from toolfleet.orchestrator.httpapi.wire import ID_PATTERN, Accepted, ConfirmationAnswer
from toolfleet.shared.completions import UNCHANGED
from toolfleet.shared.messages import Completion, PendingCall

CallId = Annotated[str, Path(pattern=ID_PATTERN, description="The waiting call's id.")]


def confirmations_router(api: HttpApi) -> APIRouter:
    """The confirmation route, beside the other `/tickets` routes."""
    router = APIRouter(prefix="/tickets", tags=["tickets"], responses=documented(*COMMON_ERRORS))

    @router.post(
        "/{call_id}/confirmation",
        status_code=202,
        response_model=Accepted,
        responses=documented(404, 409),
        summary="Confirm or reject a call that waits for a person",
        description=(
            "Confirmed, the call is sent to the fleet, and its tool finds the payload (as "
            "edited, if given) in tool_context.tool_confirmation; rejected, the model gets "
            "one error response and the call never runs. Applied once: a call answered "
            "already answers 404 or 409."
        ),
    )
    async def confirm(call_id: CallId, body: ConfirmationAnswer, caller: Who) -> Accepted:
        answer = {"confirmed": body.confirmed}
        call = await ticket_for_post(api, caller, call_id, answer, kind="confirmation")
        if not caller.may_confirm(call):
            raise ApiError(
                403,
                f"{caller.subject!r} may not answer ticket {call_id!r}: it needs to be the "
                "ticket's user or approver:<app>, and the ticket must wait for a confirmation",
            )
        payload = body.payload if "payload" in body.model_fields_set else UNCHANGED
        # Over TOOLFLEET_MAX_PAYLOAD_BYTES, the payload is refused there (413).
        entry_id = await asyncio.to_thread(
            api.completions.confirm,
            call_id,
            body.confirmed,
            payload=payload,
            source="http",
            asked=body.asked_again,
        )
        verdict = "confirmed: the call is sent" if body.confirmed else "rejected"
        return Accepted(
            call_id=call_id,
            session_id=call.session_id,
            final=True,
            entry_id=entry_id,
            detail=f"{verdict}; the agent resumes once every call of its turn is answered",
        )

    return router


async def ticket_for_post(
    api: HttpApi,
    caller: Caller,
    call_id: str,
    response: dict[str, Any],
    *,
    kind: Literal["result", "credential", "confirmation", "cancel"] = "result",
    final: bool = True,
) -> PendingCall:
    """`api.ticket` for a post of `response`: a call that is not pending refuses the post
    and keeps it in the dead-letter stream with why, as every path does (the caller is
    told only what `api.ticket` tells them).

    Any caller may get here, for any call id: the API's client keeps only a small
    response of a refused post, so that refused posts cannot fill Redis."""
    try:
        return await api.ticket(caller, call_id)
    except ApiError:
        attempt = Completion(
            call_id=call_id,
            response=response,
            final=final,
            kind=kind,
            source="http",
            posted_at=time.time(),
        )
        await asyncio.to_thread(api.completions.dead_letter_unless_pending, attempt)
        raise
