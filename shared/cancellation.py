"""Cancelling what a session has in flight, from anywhere (CLI, HTTP, Python).

A cancellation is an entry on one stream that every orchestrator replica reads: the
replica running the session stops its invocation - the model call, and the calls out on
the fleet, each answered once with a Cancelled error, their workers told to stop them.
The session's pending tickets are closed through the completions stream (the apply-once
path), unless they are to be kept.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from pydantic import BaseModel, ConfigDict

from toolfleet.shared.completions import Completions
from toolfleet.shared.keys import Keys, SessionKey, session_key, session_parts
from toolfleet.shared.messages import error_response

CANCEL_FIELD = "cancel"
CANCELS_MAXLEN = 1000  # approximate: replicas read entries as they come


class CancelRequest(BaseModel):
    """One session's cancellation, as the cancels stream carries it."""

    model_config = ConfigDict(extra="forbid")

    app_name: str
    user_id: str
    session_id: str
    keep_tickets: bool = False
    source: str = "api"
    at: float

    @property
    def session_key(self) -> SessionKey:
        """The key of the cancelled session (its id names it only within app and user)."""
        return session_key(self.app_name, self.user_id, self.session_id)


def cancelled_response(tool: str) -> dict[str, Any]:
    """The error response of a call cancelled before it finished."""
    return error_response(
        "Cancelled",
        f"the call of {tool!r} was cancelled (by the user or an operator) before it "
        "finished; it may have had part of its effect",
    )


def cancel_session(
    client: redis.Redis,
    keys: Keys,
    completions: Completions,
    session: SessionKey,
    *,
    keep_tickets: bool = False,
    source: str = "api",
) -> list[str]:
    """Stop what the session `session` has in flight, and close its pending tickets unless
    `keep_tickets`; the ids of the tickets whose closing was posted. Only that user's
    session of that id: another user's of the same id is another session."""
    app_name, user_id, session_id = session_parts(session)
    request = CancelRequest(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        keep_tickets=keep_tickets,
        source=source,
        at=time.time(),
    )
    client.xadd(
        keys.cancels(),
        {CANCEL_FIELD: request.model_dump_json()},
        maxlen=CANCELS_MAXLEN,
        approximate=True,
    )
    if keep_tickets:
        return []
    closing = completions.pending_of(session)
    for call in closing:
        completions.cancel(call.call_id, resume=False, source=source)
    return [c.call_id for c in closing]


# The Celery remote-control command with which the orchestrator has workers stop calls
# it answered (cancelled); workers register it (toolfleet.workers.stopping).
STOP_COMMAND = "toolfleet_stop_calls"
