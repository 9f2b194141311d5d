"""Sessions in Redis: create, read (one round trip once known) and append events
with their state deltas, pending calls and owed-turn marks in one transaction.

Bounded (SessionLimits): each write gives the session's keys their time to live again,
and a history longer than its bound loses its oldest turns (compaction.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from pydantic import ValidationError

from toolfleet.orchestrator.connections import as_hash, decoded, send_together
from toolfleet.orchestrator.release import release_soon
from toolfleet.orchestrator.sessions.compaction import (
    SessionLimits,
    compact,
    keep_from,
    stage_ttl,
)
from toolfleet.orchestrator.sessions.encoding import EncodedPieces, joined_text
from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.events_cache import CachedSession, EventsCache
from toolfleet.orchestrator.sessions.fencing import Fence, Guard, GuardedWrite, write
from toolfleet.orchestrator.sessions.leases import LeaseClaim
from toolfleet.orchestrator.sessions.parked import ParkedTurns
from toolfleet.orchestrator.sessions.session import Session
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.errors import SessionExistsError, SessionNotFoundError
from toolfleet.shared.finite_json import finite_json
from toolfleet.shared.keys import Keys, SessionKey, session_key, session_parts
from toolfleet.shared.messages import PendingCall
from toolfleet.shared.pending import PendingCalls
from toolfleet.shared.redaction import (
    findable_in_pieces,
    may_name_secret,
    redacted_event_fields,
    secret_name_set,
)
from toolfleet.shared.replication import replicated
from toolfleet.shared.scripts import LuaScript
from toolfleet.shared.sealing import Sealer
from toolfleet.shared.state import APP_PREFIX, TEMP_PREFIX, USER_PREFIX

log = logging.getLogger(__name__)

# KEYS: session hash, the user's session set. ARGV: session id, TTL in seconds (0:
# none), then field/value pairs. All fields at once: a reader never sees a session
# without its user.
_CREATE_LUA = """
if redis.call('exists', KEYS[1]) == 1 then return 0 end
redis.call('hset', KEYS[1], unpack(ARGV, 3))
redis.call('sadd', KEYS[2], ARGV[1])
if tonumber(ARGV[2]) > 0 then
  redis.call('expire', KEYS[1], ARGV[2])
  redis.call('expire', KEYS[2], ARGV[2])
end
return 1
"""
_CREATE = LuaScript(_CREATE_LUA)


@dataclass(frozen=True)
class StagedAppend:
    """An event's append staged in a batch: what `SessionStore.appended` needs once the
    batch is written."""

    session: Session
    event: Event
    stored: Event  # as written: temp: state and secrets left out
    reply_index: int  # of its RPUSH among the batch's replies: the events' new length
    in_memory: bool = False  # the session holds the event already (a HeldAppend's)


@dataclass(frozen=True)
class HeldAppend:
    """An append the session holds in memory already, to be stored by the session's next
    write, before that write's own (`SessionStore.hold`)."""

    event: Event
    closed: tuple[str, ...] = ()  # calls closed with it (as `append`'s `closed`)
    also: Callable[[WriteBatch], None] | None = None  # commands of the caller's, with it
    pieces: EncodedPieces | None = None  # its parts and records, encoded already


class SessionStore:
    """Sessions of one Redis and key prefix; keeps recently read events in memory."""

    def __init__(
        self,
        client: aioredis.Redis,
        keys: Keys,
        secret_arg_names: Sequence[str] = (),
        limits: SessionLimits | None = None,
        sealer: Sealer | None = None,
        cache: EventsCache | None = None,
    ) -> None:
        self._redis = client
        self._keys = keys
        self.limits = limits or SessionLimits()
        self._secrets = secret_name_set(secret_arg_names)  # masked in stored events
        self._sealer = sealer  # seals them in the state hashes (workers open them)
        self._pending = PendingCalls(keys, self._secrets)
        self.parked = ParkedTurns(client, keys, self._secrets, sealer)
        # Per recently used session: app, user and the events stored so far (as stored).
        self._cache = cache if cache is not None else EventsCache()

    async def create(
        self,
        app_name: str,
        user_id: str,
        session_id: str | None = None,
        *,
        owner: str | None = None,
    ) -> Session:
        """Create a session (a random id when None); raise SessionExistsError if this user
        has a session of that id in this app (another user's of the same id is another
        session). `owner`: the agent that runs it when that is not the app's root agent (an
        agent tool's child session): no other agent resumes it."""
        key = session_key(app_name, user_id, session_id or uuid.uuid4().hex)
        await self._create(key, owner)
        return await self.get(key)

    async def _create(self, key: SessionKey, owner: str | None = None) -> None:
        """`create`'s write; the new session is remembered as empty, so that its first
        read is the one round trip of a session read before (no lookup of app and user,
        no read of events that cannot be there yet)."""
        app_name, user_id, session_id = session_parts(key)
        created_at = time.time()
        fields: list[str | float] = ["app_name", app_name, "user_id", user_id]
        fields += ["created_at", created_at]
        created = await _CREATE.run(
            self._redis,
            2,
            self._keys.session(key),
            self._keys.user_sessions(app_name, user_id),
            session_id,
            self.limits.ttl_s,
            *fields,
            *(("owner", owner) if owner else ()),
        )
        if not created and not await self._created_at(key, created_at):
            raise SessionExistsError(
                f"session {session_id!r} of user {user_id!r} in app {app_name!r} exists already"
            )
        release_soon(self._cache.put(key, CachedSession(app_name, user_id)))

    async def _created_at(self, key: SessionKey, created_at: float) -> bool:
        """Whether the session was created at `created_at`: by this very `create`, whose
        first reply was lost and whose retry found the session there."""
        stored = await self._redis.hget(self._keys.session(key), "created_at")
        return stored is not None and float(stored) == created_at

    async def get(self, key: SessionKey, *, lease: LeaseClaim | None = None) -> Session:
        """The session `key` (`session_key` of its app, user and id) as stored. One round
        trip for a session read before: events are append-only, so only new ones are read.

        With `lease`, take the session's lease first in that same round trip (raise
        SessionError if another holder has it): nobody else writes what is read after.
        """
        session, _ = await self._get(key, lease)
        return session

    async def get_and_append(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        lease: LeaseClaim,
        message: Event,
        owes_turn: bool | None = None,
    ) -> tuple[Session, bool]:
        """`get_or_create` under `lease`, and the user's `message` appended (as `append`
        with `owes_turn` and the lease's fence) in the same round trip when it can be:
        this replica read the session before, it has no open turn, and Redis finds it
        unchanged since. Whether `message` was appended: if not, nothing was written and
        the caller appends it itself (after finishing an open turn).

        As in ADK, the session is this user's of this app: another user's session of the
        same id is another session, neither read nor changed."""
        key = session_key(app_name, user_id, session_id)
        return await self._get_or_create(key, lease, message, owes_turn)

    async def _get_or_create(
        self,
        key: SessionKey,
        lease: LeaseClaim | None,
        message: Event | None = None,
        owes_turn: bool | None = None,
        agent: str | None = None,
    ) -> tuple[Session, bool]:
        try:
            return await self._get(key, lease, message, owes_turn)
        except SessionNotFoundError:
            pass
        with contextlib.suppress(SessionExistsError):  # created concurrently meanwhile
            await self._create(key, agent)
        return await self._get(key, lease, message, owes_turn)

    async def _get(
        self,
        key: SessionKey,
        lease: LeaseClaim | None,
        message: Event | None = None,
        owes_turn: bool | None = None,
    ) -> tuple[Session, bool]:
        app, user, session_id = session_parts(key)
        unknown = f"unknown session {session_id!r} of user {user!r} in app {app!r}"
        cached = self._cache.take(key)
        if cached is None:
            if not await self._redis.exists(self._keys.session(key)):
                raise SessionNotFoundError(unknown)
            cached = CachedSession(app, user)
        events_key, meta_key = self._keys.events(key), self._keys.session(key)
        commands = lease.commands() if lease is not None else []
        commands += [
            ("LLEN", events_key),
            ("LRANGE", events_key, len(cached.events), -1),
            # After the read of the events: a compaction before it shows in `trimmed`.
            ("HMGET", meta_key, "app_name", "active_agent", "trimmed", "created_at"),
            ("HGETALL", self._keys.session_state(key)),
            ("HGETALL", self._keys.user_state(app, user)),
            ("HGETALL", self._keys.app_state(app)),
        ]
        staged = None
        if lease is not None and message is not None:
            staged = self._stage_message(key, cached, lease, message, owes_turn)
            if staged is not None:
                commands.append(staged[1].command())
        replies = await send_together(self._redis, commands)
        appended = None
        if staged is not None:
            appended = await staged[1].replies(self._redis, replies.pop())
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        if lease is not None:
            claimed, replies = replies[:2], replies[2:]
            try:
                lease.check(claimed)
            finally:
                release_soon(self._cache.put(key, cached))
            if appended is None:  # held once the replicas have it (an append waited already)
                await replicated(self._redis)
        length, raw_events, meta, session_state, user_state, app_state = replies
        exists, active, trimmed = meta[0] is not None, meta[1], _count(meta[2], key)
        if not exists:  # expired (or deleted) since it was cached
            self._cache.drop(key)
            raise SessionNotFoundError(unknown)
        state: dict[str, Any] = {}
        for scope in (app_state, user_state, session_state):
            state.update(_state_values(as_hash(scope), key))
        made_again = cached.created is not None and meta[3] != cached.created
        cached.created = meta[3]
        reread = length < len(cached.events) or trimmed != cached.trimmed or made_again
        if reread:
            # Compacted since, deleted and made again (or Redis lost data): trust only
            # what it has now (the message appended in this round trip among it).
            cached.clear()
            cached.trimmed, raw_events = await self._read_all(key)
        cached.extend(_stored_event(raw, key) for raw in raw_events)
        release_soon(self._cache.put(key, cached))
        events = list(cached.events)
        session = Session(session_id, app, user, events, state, decoded(active) if active else None)
        if staged is None or appended is None or lease is None:
            return session, False
        stored = dataclasses.replace(staged[0], session=session, in_memory=reread)
        await self.appended(stored, appended, lease.fence)
        return session, True

    def _stage_message(
        self,
        key: SessionKey,
        cached: CachedSession,
        lease: LeaseClaim,
        message: Event,
        owes_turn: bool | None,
    ) -> tuple[StagedAppend, GuardedWrite] | None:
        """`message`'s append as a write for the read to send, guarded: applied only if the
        session is still as cached here (then the cache holds all of it, and it has no
        open turn). None when the cache already shows an open turn."""
        known = Session(session_parts(key)[2], cached.app_name, cached.user_id, cached.events)
        if known.open_turn() is not None:
            return None
        batch = WriteBatch()
        staged = self.stage_append(batch, known, message, owes_turn=owes_turn)
        guard = Guard(
            self._keys.events(key),
            self._keys.session(key),
            len(cached.events),
            cached.trimmed,
        )
        return staged, GuardedWrite.of(lease.fence, guard, batch)

    async def _read_all(self, key: SessionKey) -> tuple[int, list[bytes]]:
        """Every stored event, with the number compaction dropped before them."""
        pipe = self._redis.pipeline(transaction=True)
        pipe.hget(self._keys.session(key), "trimmed")
        pipe.lrange(self._keys.events(key), 0, -1)
        trimmed, raw_events = await pipe.execute()
        return _count(trimmed, key), raw_events

    async def set_active_agent(
        self, key: SessionKey, agent_name: str, *, fence: Fence | None = None
    ) -> None:
        """Record which agent answers the session from now on (after a transfer_to_agent)."""
        batch = WriteBatch()
        batch.hset(self._keys.session(key), "active_agent", agent_name)
        await write(self._redis, batch, fence)

    async def get_or_create(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        *,
        lease: LeaseClaim | None = None,
        owner: str | None = None,
    ) -> Session:
        """The session `session_id` of `user_id` in `app_name`, created if it does not exist
        (another user's session of the same id is another session).

        A concurrent create of the same id is harmless; `lease` as in `get`, `owner` as
        in `create`.
        """
        key = session_key(app_name, user_id, session_id)
        session, _ = await self._get_or_create(key, lease, agent=owner)
        return session

    async def append(
        self,
        session: Session,
        event: Event,
        *,
        pending: Sequence[PendingCall] = (),
        resolved: PendingCall | None = None,
        closed: Sequence[str] = (),
        owes_turn: bool | None = None,
        also: Callable[[WriteBatch], None] | None = None,
        fence: Fence | None = None,
        release: bool = False,
        held: HeldAppend | None = None,
    ) -> None:
        """Persist the event and its state delta (temp: keys stay in memory only).

        In the same atomic step: record long-running calls now `pending` (or update
        them with progress), and remove the `resolved` one; close the calls `closed`
        (answered for good: no worker starts them, no ticket opens or completes for
        them); with `resolved` or `owes_turn=True` (a user's message), mark the session
        as owing the model a turn until `resumed()` (or an append with
        `owes_turn=False`, the invocation's answer) - so a replica that dies meanwhile
        leaves it for another to finish. `also` adds commands of the caller's.

        With `fence` (an invocation's lease), Redis applies it only while that lease is
        held (else LeaseLostError), and `release` releases the lease in the same step.
        `held`: an append held back (`hold`), stored in the same step, before `event`.
        """
        batch = WriteBatch()
        earlier = self.stage_held(batch, session, held) if held is not None else None
        staged = self.stage_append(
            batch, session, event, pending=pending, resolved=resolved, closed=closed,
            owes_turn=owes_turn,
        )  # fmt: skip
        if also is not None:
            also(batch)
        # Without a fence (an ADK session service's append, a test's), once all the same:
        # a client that sends it again after a lost reply must not store the event twice.
        once = self._keys.applied_writes(session.key)
        replies = await write(self._redis, batch, fence, release=release, unfenced_once=once)
        await self.appended(staged, replies, fence, earlier=earlier)

    def hold(
        self,
        session: Session,
        event: Event,
        *,
        closed: Sequence[str] = (),
        also: Callable[[WriteBatch], None] | None = None,
        pieces: EncodedPieces | None = None,
    ) -> HeldAppend:
        """Add `event` (and its state delta) to `session` in memory only, for the
        session's next write to store: pass what this returns as that write's `held`
        (`append`, `stage_held`, `store_held`). Until then Redis has not got it, so use
        this only where losing it to a crash loses nothing (what the loop holds back:
        worker results that stay on their stream until this write trims them).
        `pieces`: the event's parts and records encoded as they were made (`may_name_secret`
        asked of each), for the write to join rather than encode the event whole."""
        _apply(session, event)
        return HeldAppend(event, tuple(closed), also, pieces)

    def may_name_secret(self, json_text: str) -> bool:
        """Whether `json_text` may hold a key masked in stored events."""
        return may_name_secret(json_text, self._secrets)

    @property
    def piece_check(self) -> Callable[[str], bool] | None:
        """What each piece of an event encoded ahead (`hold`'s `pieces`) is asked, or None
        when no piece is worth encoding: a secret name of this store's could span two
        pieces, so its events are encoded and checked whole."""
        return self.may_name_secret if findable_in_pieces(self._secrets) else None

    def stage_held(self, batch: WriteBatch, session: Session, held: HeldAppend) -> StagedAppend:
        """`held`'s append as commands of `batch` (before the write's own); pass what this
        returns to `appended` with the write's replies."""
        staged = self.stage_append(
            batch, session, held.event, closed=held.closed, in_memory=True, pieces=held.pieces
        )
        if held.also is not None:
            held.also(batch)
        return staged

    async def store_held(self, session: Session, held: HeldAppend, *, fence: Fence | None) -> None:
        """Store `held` by a write of its own (the session has no other write to make)."""
        batch = WriteBatch()
        staged = self.stage_held(batch, session, held)
        once = self._keys.applied_writes(session.key)
        await self.appended(
            staged, await write(self._redis, batch, fence, unfenced_once=once), fence
        )

    def stage_append(
        self,
        batch: WriteBatch,
        session: Session,
        event: Event,
        *,
        pending: Sequence[PendingCall] = (),
        resolved: PendingCall | None = None,
        closed: Sequence[str] = (),
        owes_turn: bool | None = None,
        in_memory: bool = False,
        pieces: EncodedPieces | None = None,
    ) -> StagedAppend:
        """`append`'s commands, added to `batch` (someone else's atomic write, e.g. the one
        that sends a model turn's calls); call `appended` with that write's replies.
        `in_memory`: the session holds the event already (`hold`). `pieces`: see `hold`."""
        durable_delta = {
            k: v for k, v in event.state_delta.items() if not k.startswith(TEMP_PREFIX)
        }
        stored = event
        if len(durable_delta) < len(event.state_delta):  # temp: keys are never stored
            stored = event.model_copy(update={"state_delta": durable_delta})
        check = self.piece_check
        joined = None if pieces is None or check is None else joined_text(stored, pieces, check)
        if joined is not None:
            text, names_secret = joined
        else:
            text = stored.model_dump_json(exclude_defaults=True)
            names_secret = self.may_name_secret(text)
        # A turn of thousands of calls is walked for secret names only when its text
        # holds one somewhere.
        if names_secret:
            redacted = redacted_event_fields(stored, self._secrets)
            if redacted:
                stored = stored.model_copy(update=redacted)
                text = stored.model_dump_json(exclude_defaults=True)
        hashed = durable_delta if self._sealer is None else self._sealer.seal(durable_delta)
        staged = StagedAppend(session, event, stored, len(batch), in_memory)
        batch.rpush(self._keys.events(session.key), text)
        for key, value in durable_delta.items():
            hash_key = self._state_hash(session, key)
            if value is None:
                batch.hdel(hash_key, key)
            else:
                # NaN and the infinities as null, as the event that writes them has them.
                batch.hset(hash_key, key, finite_json(hashed[key]))
        self._pending.stage_put(batch, pending)
        if resolved is not None:
            self._pending.stage_drop(batch, resolved.session_key, resolved.call_id)
        self._pending.stage_close(batch, session.key, closed)
        if resolved is not None or owes_turn:
            batch.sadd(self._keys.resume(), session.key)
        elif owes_turn is False:
            batch.srem(self._keys.resume(), session.key)
        stage_ttl(batch, self._keys, session, self.limits.ttl_s)
        return staged

    async def appended(
        self,
        staged: StagedAppend,
        replies: Sequence[Any],
        fence: Fence | None,
        *,
        earlier: StagedAppend | None = None,
    ) -> None:
        """The staged append was written (`replies`: the whole batch's): update the cache and
        the session in memory, and compact the history if it is over its bound. `earlier`:
        a held append (`stage_held`) staged before it in the same batch."""
        key = staged.session.key
        cached = self._cache.get(key)
        for done in (staged,) if earlier is None else (earlier, staged):
            if cached is not None:
                if replies[done.reply_index] == len(cached.events) + 1:
                    cached.append(done.stored)  # what the next read would parse
                else:
                    self._cache.drop(key)  # written elsewhere meanwhile: read it all
                    cached = None
            if not done.in_memory:
                _apply(done.session, done.event)
        if cached is not None:
            await self._compact(key, cached, fence)
            release_soon(self._cache.resized(key))
        elif replies[staged.reply_index] > self.limits.max_events:
            await self._compact_uncached(key, fence)

    async def _compact(self, key: SessionKey, cached: CachedSession, fence: Fence | None) -> None:
        """Drop the oldest whole turns once the history is over its bound. Read from the
        cache, which is the stored list here; Redis cuts only if nobody cut meanwhile."""
        cut = keep_from(cached.events, self.limits.max_events)
        if cut == 0:
            return
        if await compact(self._redis, self._keys, key, cached.trimmed, cut, fence):
            cached.cut(cut)
            cached.trimmed += cut
        else:
            self._cache.drop(key)  # someone else cut: read it all next time

    async def _compact_uncached(self, key: SessionKey, fence: Fence | None) -> None:
        """Compact a session over its bound that is not cached here (a busy replica's
        cache let it go since its read): from its whole history, read again and kept in
        the cache, so that its next writes find it there."""
        app, user, _ = session_parts(key)
        cached = CachedSession(app, user)
        cached.trimmed, raw_events = await self._read_all(key)
        cached.extend(_stored_event(raw, key) for raw in raw_events)
        await self._compact(key, cached, fence)
        release_soon(self._cache.put(key, cached))

    def _state_hash(self, session: Session, key: str) -> str:
        if key.startswith(APP_PREFIX):
            return self._keys.app_state(session.app_name)
        if key.startswith(USER_PREFIX):
            return self._keys.user_state(session.app_name, session.user_id)
        return self._keys.session_state(session.key)

    async def pending_calls(self, key: SessionKey | None = None) -> list[PendingCall]:
        """Calls waiting for a final result or a credential (of one session, if given:
        only its records are read), oldest first."""
        if key is not None:
            return await self._pending.asession(self._redis, key)
        return await self._pending.aall(self._redis)

    async def pending_counts(self, keys: Sequence[SessionKey]) -> list[int]:
        """How many calls each session of `keys` has pending, in order (no record read)."""
        return await self._pending.acounts(self._redis, keys)

    async def sessions_to_resume(self) -> list[SessionKey]:
        """Keys of the sessions owing the model a turn (see `append`), sorted."""
        owed = await self._redis.smembers(self._keys.resume())
        return sorted(SessionKey(decoded(m)) for m in owed)

    async def resumed(self, key: SessionKey, *, fence: Fence | None = None) -> None:
        """Clear the session's owed-turn mark: its invocation has ended."""
        batch = WriteBatch()
        batch.srem(self._keys.resume(), key)
        await write(self._redis, batch, fence)

    async def app_and_owner(self, key: SessionKey) -> tuple[str | None, str | None]:
        """The app a session belongs to (None if there is no such session), and the agent
        that owns it when that is not the app's root agent (an agent tool's child)."""
        app, owner = await self._redis.hmget(self._keys.session(key), "app_name", "owner")
        return (decoded(app) if app else None), (decoded(owner) if owner else None)


# Data in Redis that no toolfleet wrote (or that was damaged) is logged and passed over,
# one value at a time: one bad value must not make every session of its app unreadable.


def _stored_event(raw: bytes | str, key: SessionKey) -> Event:
    """A stored event; one that does not read back is logged and kept as an empty event
    in its place (the list's positions stay those of Redis)."""
    try:
        return Event.model_validate_json(raw)
    except ValidationError as exc:
        log.error("session %s: a stored event does not read back, passed over: %s", key, exc)
        return Event(invocation_id="", author="user")


def _state_values(stored: Mapping[Any, Any], key: SessionKey) -> dict[str, Any]:
    """A state hash's values; one that is not JSON is logged and left out."""
    values: dict[str, Any] = {}
    for name, raw in stored.items():
        try:
            values[decoded(name)] = json.loads(raw)
        except ValueError:  # UnicodeDecodeError is one
            log.error("session %s: state %r is not JSON, passed over", key, name)
    return values


def _count(raw: Any, key: SessionKey) -> int:
    """The session's count of events compaction dropped; 0 for one that is no count."""
    try:
        return int(raw or 0)
    except ValueError:
        log.error("session %s: its count of compacted events %r is no number", key, raw)
        return 0


def _apply(session: Session, event: Event) -> None:
    """Add a stored (or held) event and its state delta to the session in memory."""
    session.events.append(event)
    for key, value in event.state_delta.items():
        if value is None:
            session.state.pop(key, None)
        else:
            session.state[key] = value
