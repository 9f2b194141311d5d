"""Session operations outside an invocation, shared by ADK's session services and the HTTP
API's ADK routes: create with an initial state, append an event under the session's lease,
list a user's or an app's sessions, delete one with its pending calls."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from toolfleet.orchestrator.replica import Replica
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.errors import SessionNotFoundError
from toolfleet.shared.keys import SessionKey, session_key
from toolfleet.shared.pending import PendingCalls

# How long an append waits for a running invocation to release the session.
APPEND_WAIT_S = 30.0


async def create_with_state(
    replica: Replica,
    app_name: str,
    user_id: str,
    session_id: str | None,
    state: dict[str, Any] | None,
) -> Session:
    """Create the session (a random id when None) with the initial `state`; raise
    SessionExistsError when this user has a session of that id in the app.

    The state is stored as ADK stores it: an event carrying the delta, so the scopes (app:,
    user:, temp:) apply as for any tool's write."""
    session = await replica.store.create(app_name, user_id, session_id)
    if state:
        event = Event(invocation_id="", author="user", state_delta=dict(state))
        await replica.store.append(session, event)
    return session


async def append_under_lease(
    replica: Replica, key: SessionKey, event: Event, wait_s: float = APPEND_WAIT_S
) -> Session:
    """Store `event` on the session under its lease, waiting up to `wait_s` for a running
    invocation to release it (then SessionBusyError); return the session as stored after.

    Raises:
        SessionNotFoundError: There is no such session (or it expired)."""
    async with replica.leases.hold(key, wait_s) as hold:
        current = await replica.store.get(key)
        await replica.store.append(current, event, fence=hold.fence)
    return current


async def list_user_sessions(replica: Replica, app_name: str, user_id: str) -> list[Session]:
    """The user's sessions of the app with their state and events, by id; ids of sessions
    that expired are forgotten."""
    user_sessions = replica.keys.user_sessions(app_name, user_id)
    sessions, expired = [], []
    for raw in sorted(await replica.redis.smembers(user_sessions)):
        session_id = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            session = await replica.store.get(session_key(app_name, user_id, session_id))
        except SessionNotFoundError:
            expired.append(session_id)
            continue
        sessions.append(session)
    if expired:
        await replica.redis.srem(user_sessions, *expired)
    return sessions


async def list_app_sessions(replica: Replica, app_name: str) -> list[Session]:
    """Every user's sessions of the app (ADK's `list_sessions` without a user), by user and
    id: the users are found by their session sets' keys (a scan of the keyspace)."""
    prefix = replica.keys.user_sessions(app_name, "")
    users: set[str] = set()
    async for raw in replica.redis.scan_iter(match=_glob_escaped(prefix) + "*", count=1000):
        key = raw.decode() if isinstance(raw, bytes) else str(raw)
        users.add(unquote(key[len(prefix) :]))
    sessions: list[Session] = []
    for user_id in sorted(users):
        sessions += await list_user_sessions(replica, app_name, user_id)
    return sessions


def _glob_escaped(text: str) -> str:
    """`text` matched literally by a SCAN pattern (a key prefix may hold `*`, `?`, `[`)."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


async def delete_session(replica: Replica, app_name: str, user_id: str, session_id: str) -> None:
    """Delete the session: its events, its session-scoped state and its bookkeeping (user
    and app state stay, as in ADK). Its pending calls are closed with it: a result posted
    for one later is refused, even to a new session of the same id."""
    key = session_key(app_name, user_id, session_id)
    keys = replica.keys
    await PendingCalls(keys).adrop_session(
        replica.redis,
        key,
        keys.session(key),
        keys.events(key),
        keys.session_state(key),
        keys.results(key),
        keys.completion_order(key),
    )
    await replica.redis.srem(keys.user_sessions(app_name, user_id), session_id)
