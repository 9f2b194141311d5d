"""What a call started through `toolfleet mcp serve` waits for, handed over when the MCP
client asks (`toolfleet_result`).

Such a call has no toolfleet session to resume. A long-running call's results, posted to
the completions stream as for any ticket, are read here, and removed once the final one
was handed over. A call waiting for a person's confirmation takes only a confirmation
(`Completions.confirm`: `toolfleet tickets approve|reject`, the HTTP API, the approvals
page) or a cancellation: confirmed, it is handed back to be sent; rejected or cancelled,
that is its final answer and it never runs. Whoever claims the answer first (one
script) is the only one to act on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis
from pydantic import ValidationError

from toolfleet.orchestrator.mcpserve.fleet_calls import SESSION_PREFIX
from toolfleet.shared.completions import Completions
from toolfleet.shared.confirmation import (
    SERVED_AGENT,
    ToolConfirmation,
    posted_answer,
    rejection_message,
)
from toolfleet.shared.errors import AlreadyCompletedError, CompletionError
from toolfleet.shared.keys import Keys, SessionKey, session_parts
from toolfleet.shared.messages import COMPLETION_FIELD, Completion, PendingCall, error_response
from toolfleet.shared.pending import CLOSED_TTL_S
from toolfleet.shared.scripts import LuaScript

# KEYS: 1 completions stream, 2 the session's order list, 3 pending hash, 4 closed marker,
# 5 the session's pending set, 6 the age index.
# ARGV: 1 the deciding entry, 2 call id, 3 "close" (answered) or "drop" (to be sent now),
# 4 closed TTL, 5... every entry posted for the call. 0 when the deciding entry is gone:
# another request claimed it, and only that one acts on it.
_CLAIM_LUA = """
if #redis.call('xrange', KEYS[1], ARGV[1], ARGV[1]) == 0 then return 0 end
for i = 5, #ARGV do
  redis.call('xdel', KEYS[1], ARGV[i])
  redis.call('lrem', KEYS[2], 0, ARGV[i])
end
redis.call('hdel', KEYS[3], ARGV[2])
redis.call('srem', KEYS[5], ARGV[2])
redis.call('zrem', KEYS[6], ARGV[2])
if ARGV[3] == 'close' then redis.call('set', KEYS[4], 1, 'EX', ARGV[4]) end
return 1
"""
_CLAIM = LuaScript(_CLAIM_LUA)

# What answers each kind of pending call: a confirmation never completes a long-running
# call, and a result never confirms a call that waits for a person.
_ANSWERS = {"result": ("result", "cancel"), "confirmation": ("confirmation", "cancel")}


@dataclass(frozen=True)
class Confirmed:
    """A call a person confirmed, claimed by this request: it is to be sent now."""

    waiting: PendingCall
    answer: ToolConfirmation


class FinalResults:
    """Looks up what was posted for the pending calls of one app (synchronous Redis)."""

    def __init__(
        self, client: redis.Redis, keys: Keys, completions: Completions, app: str, user_id: str
    ):
        self._redis = client
        self._keys = keys
        self._completions = completions
        self._app = app
        self._user = user_id

    def fetch(self, call_id: str) -> dict[str, Any] | Confirmed:
        """The call's final result once posted (then forgotten), or Confirmed; else its
        status and the latest progress. An error response for an unknown call, another
        app's or another user's, and for a rejected or cancelled confirmation."""
        try:
            pending = self._completions.get(call_id)
        except AlreadyCompletedError as exc:
            # What answered another session's call is that session's to know.
            told = str(exc) if self._served(self._completions.answered_in(call_id)) else None
            return error_response("UnknownCall", told or _no_pending(call_id))
        except CompletionError as exc:
            return error_response("UnknownCall", str(exc))
        # Only calls this server's user made through `toolfleet mcp serve`: an agent's
        # session (of an app named alike) answers its own calls, and another user's
        # server (of the same app) its own.
        ours = self._served(pending.session_key) and pending.agent == SERVED_AGENT
        if not ours or pending.kind not in _ANSWERS:
            return error_response("UnknownCall", _no_pending(call_id))
        posted = [(e, c) for e, c in self._posted(pending) if c.kind in _ANSWERS[pending.kind]]
        if pending.kind == "confirmation":
            return self._decided(pending, posted)
        final = next(((e, c) for e, c in posted if c.final), None)
        if final is None:
            progress = [c.response for _, c in posted]
            return {"status": "pending", "call_id": call_id, "progress": progress[-5:]}
        return self._claimed(pending, final[0], "close", final[1].response)

    def _served(self, session: str | None) -> bool:
        """Whether `session` (a SessionKey) is one whose calls this server made."""
        if session is None:
            return False
        try:
            app, user, session_id = session_parts(SessionKey(session))
        except ValueError:
            return False
        return (app, user) == (self._app, self._user) and session_id.startswith(SESSION_PREFIX)

    def _decided(
        self, pending: PendingCall, posted: list[tuple[str, Completion]]
    ) -> dict[str, Any] | Confirmed:
        """What a call waiting for a person gets: nothing yet, sent, or its final error."""
        if not posted:
            hint = pending.ticket.get("hint", "")
            return {"status": "awaiting_confirmation", "call_id": pending.call_id, "hint": hint}
        entry_id, decision = posted[0]
        response = decision.response  # a cancellation's error
        if decision.kind == "confirmation":
            try:
                answer = posted_answer(pending.ticket, decision.response)
            except ValidationError:  # not a confirmation: the call does not run
                answer = ToolConfirmation(confirmed=False)
            if answer.confirmed:
                return self._claimed(pending, entry_id, "drop", Confirmed(pending, answer))
            response = error_response("ConfirmationRejected", rejection_message(pending.tool))
        return self._claimed(pending, entry_id, "close", response)

    def _claimed(
        self, pending: PendingCall, entry_id: str, mode: str, outcome: dict[str, Any] | Confirmed
    ) -> dict[str, Any] | Confirmed:
        """`outcome` if this request claimed the deciding entry (the call's entries and
        its record go, in one step); an error if another request had claimed it."""
        every = [e for e, _ in self._posted(pending)]
        claimed = _CLAIM.run_sync(
            self._redis,
            6,
            self._keys.completions(pending.app_name),
            self._keys.completion_order(pending.session_key),
            self._keys.pending(),
            self._keys.closed(pending.session_key, pending.call_id),
            self._keys.session_pending(pending.session_key),
            self._keys.pending_by_age(),
            entry_id,
            pending.call_id,
            mode,
            CLOSED_TTL_S,
            *every,
        )
        if not claimed:
            message = f"call {pending.call_id!r} was handed over to another request"
            return error_response("UnknownCall", message)
        return outcome

    def _posted(self, pending: PendingCall) -> list[tuple[str, Completion]]:
        """The call's completions not applied yet, oldest first."""
        stream = self._keys.completions(pending.app_name)
        posted: list[tuple[str, Completion]] = []
        for entry_id in self._completions.waiting(pending):
            entries: Any = self._redis.xrange(stream, entry_id, entry_id)
            for _, fields in entries:
                raw = fields[COMPLETION_FIELD.encode()]
                posted.append((entry_id, Completion.model_validate_json(raw)))
        return posted


def _no_pending(call_id: str) -> str:
    return f"no pending call with id {call_id!r}"
