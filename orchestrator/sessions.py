"""Sessions in Redis: events (google-genai Contents plus metadata) and scoped state."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from google.genai import types
from pydantic import BaseModel, Field
from redis.asyncio.client import Pipeline

from orchestrator.connections import decoded
from shared.context import APP_PREFIX, TEMP_PREFIX, USER_PREFIX
from shared.errors import SessionError
from shared.keys import Keys
from shared.messages import CallStatus, PendingCall, ToolActions, ToolResult
from shared.redaction import redacted_event_fields, secret_name_set


class CallRecord(BaseModel):
    """Where and how one call ran; kept beside its function response."""

    call_id: str
    tool: str
    status: CallStatus
    worker: str = ""
    pid: int = 0
    started_at: float = 0.0
    finished_at: float = 0.0
    attempt: int = 1

    @classmethod
    def of(cls, result: ToolResult) -> CallRecord:
        return cls(
            call_id=result.call_id,
            tool=result.tool,
            status=result.status,
            worker=result.worker,
            pid=result.pid,
            started_at=result.started_at,
            finished_at=result.finished_at,
            attempt=result.attempt,
        )


class Event(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    invocation_id: str
    author: str
    timestamp: float = Field(default_factory=time.time)
    content: types.Content | None = None
    state_delta: dict[str, Any] = Field(default_factory=dict)
    actions: ToolActions = Field(default_factory=ToolActions)
    calls: list[CallRecord] = Field(default_factory=list)
    error: str | None = None
    # An intermediate result of a long-running call: shown, not sent to the model.
    progress: dict[str, Any] | None = None
    # Tools waiting for a credential (call id, tool, auth config): shown, not sent.
    credential_requests: list[dict[str, Any]] = Field(default_factory=list)


def answer_of(event: Event) -> str:
    """The user-facing text of an event: the model's text, or - when the model is not
    asked to summarize (skip_summarization) - the tools' responses themselves."""
    if event.content is None:
        return ""
    if event.actions.skip_summarization:
        responses = [
            p.function_response.response or {}
            for p in event.content.parts or ()
            if p.function_response
        ]
        return "\n".join(
            str(r["result"]) if set(r) == {"result"} else json.dumps(r) for r in responses
        )
    if event.content.role != "model":
        return ""
    return "".join(p.text for p in event.content.parts or () if p.text and not p.thought)


@dataclass
class Session:
    id: str
    app_name: str
    user_id: str
    events: list[Event] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)

    active_agent: str | None = None  # the agent answering this session (after a transfer)

    def contents(self) -> list[types.Content]:
        return [e.content for e in self.events if e.content is not None]

    def open_turn(self) -> Event | None:
        """The last event, if it is a model turn whose function calls have no responses
        yet: its invocation died while the calls ran."""
        last = self.events[-1] if self.events else None
        if last is None or last.content is None or last.content.role != "model":
            return None
        if not any(p.function_call for p in last.content.parts or ()):
            return None
        return last

    def authored_contents(self) -> tuple[list[str], list[types.Content]]:
        with_content = [e for e in self.events if e.content is not None]
        return [e.author for e in with_content], [e.content for e in with_content if e.content]


# Parsed events of this many recently read sessions are kept in memory.
EVENTS_CACHE_SESSIONS = 1024


@dataclass
class _Cached:
    app_name: str
    user_id: str
    events: list[Event]


class SessionExistsError(SessionError):
    """create() of an id that is taken."""


class SessionNotFoundError(SessionError):
    """get() of an id that does not exist."""


@dataclass(frozen=True)
class LeaseClaim:
    """Take the session's lease in the same round trip as reading it."""

    owner: str
    ttl_s: float


def merge_deltas(deltas: list[dict[str, Any]]) -> dict[str, Any]:
    """Later calls win: deltas are applied in call order, never arrival order."""
    merged: dict[str, Any] = {}
    for delta in deltas:
        merged.update(delta)
    return merged


_RELEASE_LUA = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)


class SessionStore:
    def __init__(
        self, client: aioredis.Redis, keys: Keys, secret_arg_names: Sequence[str] = ()
    ) -> None:
        self._redis = client
        self._keys = keys
        self._secrets = secret_name_set(secret_arg_names)  # masked in stored events
        # Per recently used session: app, user and the events stored so far (as stored).
        self._cache: OrderedDict[str, _Cached] = OrderedDict()

    @property
    def redis(self) -> aioredis.Redis:
        return self._redis

    async def create(self, app_name: str, user_id: str, session_id: str | None = None) -> Session:
        session_id = session_id or uuid.uuid4().hex
        created = await self._redis.hsetnx(self._keys.session(session_id), "app_name", app_name)
        if not created:
            raise SessionExistsError(f"session {session_id!r} exists already")
        pipe = self._redis.pipeline(transaction=True)
        pipe.hset(
            self._keys.session(session_id),
            mapping={"app_name": app_name, "user_id": user_id, "created_at": time.time()},
        )
        pipe.sadd(self._keys.user_sessions(app_name, user_id), session_id)
        await pipe.execute()
        return await self.get(session_id)

    async def get(self, session_id: str, *, lease: LeaseClaim | None = None) -> Session:
        """The session as stored. One round trip for a session read before: its app and
        user never change, and events are append-only, so only new ones are read.

        With `lease`, take the session's lease first in that same round trip (raise
        SessionError if another holder has it): nobody else writes what is read after.
        """
        cached = self._cache.pop(session_id, None)
        if cached is None:
            meta = await self._redis.hgetall(self._keys.session(session_id))
            if not meta:
                raise SessionNotFoundError(f"unknown session {session_id!r}")
            cached = _Cached(decoded(meta[b"app_name"]), decoded(meta[b"user_id"]), [])
        app, user = cached.app_name, cached.user_id
        pipe = self._redis.pipeline(transaction=False)
        if lease is not None:
            lease_key = self._keys.lease(session_id)
            pipe.set(lease_key, lease.owner, nx=True, px=int(lease.ttl_s * 1000))
            pipe.get(lease_key)
        pipe.hget(self._keys.session(session_id), "active_agent")
        pipe.llen(self._keys.events(session_id))
        pipe.lrange(self._keys.events(session_id), len(cached.events), -1)
        pipe.hgetall(self._keys.session_state(session_id))
        pipe.hgetall(self._keys.user_state(app, user))
        pipe.hgetall(self._keys.app_state(app))
        replies = await pipe.execute()
        if lease is not None:
            acquired, holder, *replies = replies
            if not acquired and (holder is None or decoded(holder) != lease.owner):
                self._remember(session_id, cached)
                raise _lease_held(session_id, holder)
        active, length, raw_events, session_state, user_state, app_state = replies
        state: dict[str, Any] = {}
        for scope in (app_state, user_state, session_state):
            state.update({decoded(k): json.loads(v) for k, v in scope.items()})
        if length < len(cached.events):  # Redis lost data: trust only what it has
            cached.events.clear()
            raw_events = await self._redis.lrange(self._keys.events(session_id), 0, -1)
        cached.events.extend(Event.model_validate_json(raw) for raw in raw_events)
        self._remember(session_id, cached)
        events = list(cached.events)
        return Session(session_id, app, user, events, state, decoded(active) if active else None)

    def _remember(self, session_id: str, cached: _Cached) -> None:
        self._cache[session_id] = cached
        while len(self._cache) > EVENTS_CACHE_SESSIONS:
            self._cache.popitem(last=False)  # least recently used

    async def set_active_agent(self, session_id: str, agent_name: str) -> None:
        await self._redis.hset(self._keys.session(session_id), "active_agent", agent_name)

    async def get_or_create(
        self, app_name: str, user_id: str, session_id: str, *, lease: LeaseClaim | None = None
    ) -> Session:
        try:
            return await self.get(session_id, lease=lease)
        except SessionNotFoundError:
            pass
        with contextlib.suppress(SessionExistsError):  # created concurrently meanwhile
            await self.create(app_name, user_id, session_id)
        return await self.get(session_id, lease=lease)

    async def append(
        self,
        session: Session,
        event: Event,
        *,
        pending: Sequence[PendingCall] = (),
        resolved: PendingCall | None = None,
        owes_turn: bool | None = None,
        also: Callable[[Pipeline], None] | None = None,
    ) -> None:
        """Persist the event and its state delta (temp: keys stay in memory only).

        In the same transaction: record long-running calls now `pending` (or update
        them with progress), and remove the `resolved` one; with `resolved` or
        `owes_turn=True` (a user's message), mark the session as owing the model a turn
        until `resumed()` (or an append with `owes_turn=False`, the invocation's answer) -
        so a replica that dies meanwhile leaves it for another to finish. `also` adds
        commands of the caller's to the transaction.
        """
        durable_delta = {
            k: v for k, v in event.state_delta.items() if not k.startswith(TEMP_PREFIX)
        }
        redacted = redacted_event_fields(event, self._secrets)
        stored = event.model_copy(update={"state_delta": durable_delta, **redacted})
        pipe = self._redis.pipeline(transaction=True)
        pipe.rpush(self._keys.events(session.id), stored.model_dump_json(exclude_defaults=True))
        if also is not None:
            also(pipe)
        for key, value in durable_delta.items():
            hash_key = self._state_hash(session, key)
            if value is None:
                pipe.hdel(hash_key, key)
            else:
                pipe.hset(hash_key, key, json.dumps(value))
        for call in pending:
            pipe.hset(self._keys.pending(), call.call_id, call.model_dump_json())
        if resolved is not None:
            pipe.hdel(self._keys.pending(), resolved.call_id)
        if resolved is not None or owes_turn:
            pipe.sadd(self._keys.resume(), session.id)
        elif owes_turn is False:
            pipe.srem(self._keys.resume(), session.id)
        length = (await pipe.execute())[0]
        cached = self._cache.get(session.id)
        if cached is not None:
            if length == len(cached.events) + 1:
                cached.events.append(stored)  # what the next read would parse
            else:
                del self._cache[session.id]  # written elsewhere meanwhile: read it all
        session.events.append(event)
        for key, value in event.state_delta.items():
            if value is None:
                session.state.pop(key, None)
            else:
                session.state[key] = value

    def _state_hash(self, session: Session, key: str) -> str:
        if key.startswith(APP_PREFIX):
            return self._keys.app_state(session.app_name)
        if key.startswith(USER_PREFIX):
            return self._keys.user_state(session.app_name, session.user_id)
        return self._keys.session_state(session.id)

    async def pending_calls(self, session_id: str | None = None) -> list[PendingCall]:
        raw = await self._redis.hgetall(self._keys.pending())
        calls = [PendingCall.model_validate_json(v) for v in raw.values()]
        return sorted(
            (c for c in calls if session_id is None or c.session_id == session_id),
            key=lambda c: c.created_at,
        )

    async def sessions_to_resume(self) -> list[str]:
        return sorted(decoded(m) for m in await self._redis.smembers(self._keys.resume()))

    async def resumed(self, session_id: str) -> None:
        await self._redis.srem(self._keys.resume(), session_id)

    async def unleased(self, session_ids: Sequence[str]) -> list[str]:
        """Those of the sessions no replica holds the lease of."""
        if not session_ids:
            return []
        holders = await self._redis.mget([self._keys.lease(s) for s in session_ids])
        return [s for s, holder in zip(session_ids, holders, strict=True) if holder is None]

    async def app_of(self, session_id: str) -> str | None:
        app = await self._redis.hget(self._keys.session(session_id), "app_name")
        return decoded(app) if app is not None else None

    async def wait_for_lease(
        self, session_id: str, owner: str, ttl_s: float, wait_s: float, poll_s: float = 0.05
    ) -> None:
        """Acquire the lease, waiting while another invocation of the session runs."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return await self.acquire_lease(session_id, owner, ttl_s)
            except SessionError:
                if time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(poll_s)  # the holder's invocation is still running

    async def acquire_lease(self, session_id: str, owner: str, ttl_s: float) -> None:
        """One replica runs a session at a time; raise if another holds it."""
        key = self._keys.lease(session_id)
        if await self._redis.set(key, owner, nx=True, px=int(ttl_s * 1000)):
            return
        holder = await self._redis.get(key)
        if holder is not None and decoded(holder) == owner:
            await self._redis.pexpire(key, int(ttl_s * 1000))
            return
        raise _lease_held(session_id, holder)

    async def release_lease(self, session_id: str, owner: str) -> None:
        pipe = self._redis.pipeline(transaction=False)
        self.stage_release_lease(pipe, session_id, owner)
        await pipe.execute()

    def stage_release_lease(self, pipe: Pipeline, session_id: str, owner: str) -> None:
        # Delete only our own lease: compare-and-delete in one step.
        pipe.eval(_RELEASE_LUA, 1, self._keys.lease(session_id), owner)


def _lease_held(session_id: str, holder: bytes | str | None) -> SessionError:
    return SessionError(
        f"session {session_id!r} is being run by another orchestrator "
        f"({decoded(holder or b'?')}); wait for its invocation to end"
    )
