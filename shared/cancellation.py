"""Cancelling what a session has in flight, from anywhere (CLI, HTTP, Python).

A cancellation is an entry on one stream that every orchestrator replica reads: the
replica running the session stops its invocation - the model call, and the calls out on
the fleet, each answered once with a Cancelled error, their workers told to stop them.
The session's pending tickets are closed through the completions stream (the apply-once
path), unless they are to be kept.

A replica that died mid-turn reads no stream: the cancellation is also kept on the
session (`Keys.cancelled`), with the length its events had, and the calls its open turn
sent are closed (a worker that takes one later does not run it). The replica that
resumes the session next - its open turn, or the model's turn it still owes - finds the
cancellation there and, if nothing was added to the session since, stops that work as
the live replica would have.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict

from toolfleet.shared.completions import Completions
from toolfleet.shared.keys import Keys, SessionKey, session_key, session_parts
from toolfleet.shared.messages import error_response
from toolfleet.shared.pending import CLOSED_TTL_S
from toolfleet.shared.scripts import LuaScript

CANCEL_FIELD = "cancel"
CANCELS_MAXLEN = 1000  # approximate: replicas read entries as they come
# A cancellation kept for a session no replica ran outlives any takeover of it.
KEPT_CANCEL_TTL_S = 24 * 3600

# KEYS: the session's kept cancellation, its events, its open turn's sent calls. ARGV:
# keep_tickets (1/0), the TTL, the prefix of its calls' closed markers, their TTL. The
# events' length is read in the same step (a later write to the session shows), and the
# calls sent are closed: a worker that takes one later does not run it.
_KEEP = LuaScript(
    """
local events = redis.call('llen', KEYS[2])
redis.call('set', KEYS[1], cjson.encode({events = events, keep_tickets = ARGV[1] == '1'}),
           'EX', ARGV[2])
for _, id in ipairs(redis.call('smembers', KEYS[3])) do
  redis.call('set', ARGV[3] .. id, 1, 'EX', ARGV[4])
end
return events
"""
)


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
    # Kept first: a replica that resumes the session after the broadcast finds it.
    _KEEP.run_sync(
        client, 3, keys.cancelled(session), keys.events(session), keys.dispatched(session),
        int(keep_tickets), KEPT_CANCEL_TTL_S, keys.closed(session, ""), CLOSED_TTL_S,
    )  # fmt: skip
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


@dataclass(frozen=True)
class KeptCancel:
    """A session's cancellation as kept for the replica that resumes it."""

    keep_tickets: bool


async def kept_cancel(client: aioredis.Redis, keys: Keys, session: SessionKey) -> KeptCancel | None:
    """The cancellation kept for `session` if nothing was added to it since (the work it
    stops is still the session's last), else None; a kept one that no longer applies goes."""
    key = keys.cancelled(session)
    pipe = client.pipeline(transaction=True)
    pipe.get(key)
    pipe.llen(keys.events(session))
    raw, events = await pipe.execute()
    if raw is None:
        return None
    try:
        kept = json.loads(raw)
        applies = int(kept["events"]) == int(events)
        keep_tickets = bool(kept.get("keep_tickets"))
    except (ValueError, KeyError, TypeError):
        applies, keep_tickets = False, False
    if not applies:
        await client.delete(key)
        return None
    return KeptCancel(keep_tickets)


async def forget_kept_cancel(client: aioredis.Redis, keys: Keys, session: SessionKey) -> None:
    """The kept cancellation was carried out."""
    await client.delete(keys.cancelled(session))
