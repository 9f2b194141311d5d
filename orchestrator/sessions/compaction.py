"""Bounds on a session's history: how many events are kept and how long an idle session
lives (TOOLFLEET_SESSION_MAX_EVENTS, TOOLFLEET_SESSION_TTL_S).

Compaction drops the oldest events, whole turns at a time: the kept history starts at a
user's message (the model's contents must open with a user turn), and a function call
is never dropped while a response to it is kept or still to come (a long-running call
waiting for its result, a turn parked for a credential). When no such cut keeps the
history within the bound, the smallest history that can be kept is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis

from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.fencing import Fence
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.keys import Keys, SessionKey
from toolfleet.shared.messages import CallStatus
from toolfleet.shared.scripts import LuaScript

# Sessions' own keys get this TTL on every write; 30 days, the documented default.
DEFAULT_TTL_S = 30 * 24 * 3600

# KEYS: 1 events list, 2 session hash, 3 lease (or the session hash: no fence).
# ARGV: 1 events dropped so far (as the caller read them), 2 how many to drop now,
#       3 the lease token ('' without a fence).
# Only a list whose prefix is still the one the caller read is cut: the `trimmed`
# count changes with every cut, and events are otherwise only appended.
COMPACT_LUA = """
if ARGV[3] ~= '' and redis.call('get', KEYS[3]) ~= ARGV[3] then return 0 end
if redis.call('exists', KEYS[2]) == 0 then return 0 end
if tonumber(redis.call('hget', KEYS[2], 'trimmed') or '0') ~= tonumber(ARGV[1]) then
  return 0
end
redis.call('ltrim', KEYS[1], ARGV[2], -1)
redis.call('hincrby', KEYS[2], 'trimmed', ARGV[2])
return 1
"""
_COMPACT = LuaScript(COMPACT_LUA)


@dataclass(frozen=True)
class SessionLimits:
    """How much history a session keeps, and how long it lives idle (0: forever)."""

    max_events: int = 1_000
    ttl_s: int = DEFAULT_TTL_S


def stage_ttl(batch: WriteBatch, keys: Keys, session: Session, ttl_s: int) -> None:
    """Restart the idle clock of the session's keys (and of its user's session list, which
    lives as long as their latest session); nothing with `ttl_s` 0."""
    if ttl_s <= 0:
        return
    batch.refresh_ttl(ttl_s, *idle_keys(keys, session.key, session.app_name, session.user_id))


def idle_keys(keys: Keys, session: SessionKey, app_name: str, user_id: str) -> tuple[str, ...]:
    """The keys whose idle clock a write to `session` restarts (`stage_ttl`)."""
    return (
        keys.session(session),
        keys.events(session),
        keys.session_state(session),
        keys.results(session),
        keys.session_pending(session),
        keys.user_sessions(app_name, user_id),
    )


async def compact(
    client: aioredis.Redis,
    keys: Keys,
    session: SessionKey,
    trimmed: int,
    cut: int,
    fence: Fence | None,
) -> bool:
    """Drop the first `cut` stored events, if `trimmed` is still the count dropped before
    them (and `fence`'s lease is held); whether they were dropped."""
    done = await _COMPACT.run(
        client,
        3,
        keys.events(session),
        keys.session(session),
        fence.key if fence else keys.session(session),
        trimmed,
        cut,
        fence.token if fence else "",
    )
    return bool(done)


def keep_from(events: Sequence[Event], max_events: int) -> int:
    """Index of the first event to keep (0: keep all) so that at most `max_events`
    remain, cutting only before a user's message whose earlier calls are all settled."""
    if len(events) <= max_events:
        return 0
    ends = _settled_at(events)
    best = 0
    settled_before: float = -1  # the latest index at which a call made so far settles
    for index, event in enumerate(events):
        if index > 0 and _is_user_message(event) and settled_before < index:
            best = index
            if len(events) - index <= max_events:
                break
        for call_id in _calls_of(event):
            settled_before = max(settled_before, ends.get(call_id, math.inf))
    return best


def _settled_at(events: Sequence[Event]) -> dict[str, int]:
    """Per call id, the index of the event with its final response (an intermediate
    'pending' response of a long-running call does not settle it)."""
    settled: dict[str, int] = {}
    for index, event in enumerate(events):
        if event.content is None:
            continue
        waiting = {c.call_id for c in event.calls if c.status is CallStatus.PENDING}
        for part in event.content.parts or ():
            response = part.function_response
            if response is not None and response.id not in waiting:
                settled.setdefault(response.id or "", index)
    return settled


def _calls_of(event: Event) -> list[str]:
    if event.content is None or event.content.role != "model":
        return []
    return [p.function_call.id or "" for p in event.content.parts or () if p.function_call]


def _is_user_message(event: Event) -> bool:
    """A message a user sent (not a function response, which also has the user role)."""
    content = event.content
    if event.author != "user" or content is None or content.role != "user":
        return False
    return not any(p.function_response for p in content.parts or ())
