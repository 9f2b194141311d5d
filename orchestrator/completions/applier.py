"""Apply one posted completion: a final result (once per call), progress, or a
credential; refuse what cannot apply into the dead-letter stream.

Exactly once: a result is applied by one Redis script, under the session's lease -
claim the call, append its response event, drop (or update) the pending record, close
the call, mark the session as owing the model a turn, acknowledge and delete the
stream entry. Either all of it happens or none: an entry still in the stream was not
applied, and whoever takes it over applies it. A completion that cannot apply goes to
the dead-letter stream with its reason, in the same step as its acknowledgement.

One session: the completion names its call's session (its poster read it from the
call's record). The applier takes that session's lease, then reads the record - once,
with whether the entry is still in the stream - and refuses a completion whose call
belongs to another session: an entry written past the poster acts on no other session.

In order: a session's completions apply in the order the stream accepted them (the
session's order list, written with the entry). A replica that reads an entry whose
session has an earlier one waiting applies that earlier one first, taking it over.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis.asyncio as aioredis
from google.genai import types
from pydantic import ValidationError

from toolfleet.orchestrator.completions.entries import PostedEntry
from toolfleet.orchestrator.completions.resumer import SessionResumer
from toolfleet.orchestrator.completions.spans import completion_span
from toolfleet.orchestrator.completions.waiting import WaitingCalls
from toolfleet.orchestrator.connections import decoded, send_together
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.orchestrator.sessions.compaction import idle_keys
from toolfleet.orchestrator.sessions.events import CallRecord, Event
from toolfleet.orchestrator.sessions.leases import LeaseHold
from toolfleet.shared import tracing
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.completions import (
    COMPLETIONS_GROUP,
    DEAD_LETTERS_MAXLEN,
    dead_letter_fields,
)
from toolfleet.shared.confirmation import ToolConfirmation, posted_answer
from toolfleet.shared.errors import SessionError, SessionNotFoundError
from toolfleet.shared.json_depth import DEFAULT_MAX_JSON_DEPTH
from toolfleet.shared.keys import Keys, SessionKey
from toolfleet.shared.messages import CallStatus, Completion, PendingCall
from toolfleet.shared.metrics import guarded, metrics
from toolfleet.shared.pending import CLOSED_TTL_S, PROGRESS_KEPT, PendingCalls
from toolfleet.shared.redaction import DEFAULT_SECRET_NAMES
from toolfleet.shared.scripts import LuaScript

log = logging.getLogger(__name__)

GROUP = COMPLETIONS_GROUP
# Runs of the apply script for one progress report whose record the worker keeps writing.
RECORD_TRIES = 5
APPLIED_TTL_S = 7 * 24 * 3600  # how long a call id stays "already completed"
# Progress reports of one call its session stores as events at most: a ticket may post
# progress without end, and compaction keeps every event after a call still pending.
# Later ones update its ticket's record (its latest PROGRESS_KEPT) and nothing else.
PROGRESS_EVENTS_STORED = 100
# Times applying an entry may raise before it is dead-lettered (each try after the first
# comes when a replica takes it over, claim_idle_ms later), and how long a count is kept.
MAX_APPLY_FAILURES = 5
APPLY_FAILURES_TTL_S = 24 * 3600

# KEYS: 1 lease, 2 pending hash, 3 applied claim, 4 events, 5 resume set, 6 stream,
#       7 order list, 8 closed marker, 9 session hash, 10 dead letters, 11 the session's
#       pending set, 12 the age index (the record's id goes in and out of both with it),
#       13 the count of the call's progress events stored.
# ARGV: 1 token, 2 call id, 3 entry id, 4 event JSON, 5 session id, 6 group,
#       7 applied TTL, 8 claim JSON, 9 posted JSON, 10 now, 11 dead-letter maxlen,
#       12 closed TTL, 13 "final", "closed" (final, without resuming the agent) or the
#       updated pending record (progress), 14 the record as read (progress: 'changed'
#       and nothing done if it changed since - the worker, which holds no lease, wrote
#       the tool's initial response - so that the update is made again on it),
#       15 the progress events of a call a session stores at most ('kept': the record
#       alone takes the others), 16 the count's TTL.
_APPLY_LUA = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('LEASELOST the session lease is not held by this writer')
end
if #redis.call('xrange', KEYS[6], ARGV[3], ARGV[3]) == 0 then return {'gone'} end
local pos = redis.call('lpos', KEYS[7], ARGV[3])
if pos and pos > 0 then return {'later'} end
local function consume()
  redis.call('xack', KEYS[6], ARGV[6], ARGV[3])
  redis.call('xdel', KEYS[6], ARGV[3])
  redis.call('lrem', KEYS[7], 1, ARGV[3])
end
local function refuse(reason)
  redis.call('xadd', KEYS[10], 'MAXLEN', '~', ARGV[11], '*',
             'completion', ARGV[9], 'reason', reason, 'at', ARGV[10])
  consume()
  return {'refused', reason}
end
if redis.call('exists', KEYS[9]) == 0 then
  redis.call('hdel', KEYS[2], ARGV[2])
  redis.call('srem', KEYS[11], ARGV[2])
  redis.call('zrem', KEYS[12], ARGV[2])
  redis.call('set', KEYS[8], 1, 'EX', ARGV[12])
  return refuse('session ' .. ARGV[5] .. ' is gone; its ticket was removed')
end
if redis.call('hexists', KEYS[2], ARGV[2]) == 0 then
  local claim = redis.call('get', KEYS[3])
  if claim then
    local ok, answered = pcall(cjson.decode, claim)
    if ok and type(answered) == 'table' and type(answered['answer']) == 'string' then
      return refuse('call ' .. ARGV[2] .. ' was already answered: ' .. answered['answer'] ..
                    ' (completion ' .. tostring(answered['entry']) .. ')')
    end
    return refuse('call ' .. ARGV[2] .. ' already has its final result')
  end
  if redis.call('exists', KEYS[8]) == 1 then
    return refuse('call ' .. ARGV[2] .. ' was answered (timed out or failed) before this result')
  end
  return refuse('no pending call with id ' .. ARGV[2])
end
local final = ARGV[13] == 'final' or ARGV[13] == 'closed'
if not final and redis.call('hget', KEYS[2], ARGV[2]) ~= ARGV[14] then return {'changed'} end
local stored = true
if not final then
  stored = redis.call('incr', KEYS[13]) <= tonumber(ARGV[15])
  redis.call('expire', KEYS[13], ARGV[16])
end
local n = stored and redis.call('rpush', KEYS[4], ARGV[4])
if final then
  redis.call('del', KEYS[13])
  redis.call('set', KEYS[3], ARGV[8], 'EX', ARGV[7])
  redis.call('set', KEYS[8], 1, 'EX', ARGV[12])
  redis.call('hdel', KEYS[2], ARGV[2])
  redis.call('srem', KEYS[11], ARGV[2])
  redis.call('zrem', KEYS[12], ARGV[2])
  if ARGV[13] == 'final' then redis.call('sadd', KEYS[5], ARGV[5]) end
else
  redis.call('hset', KEYS[2], ARGV[2], ARGV[13])
  redis.call('sadd', KEYS[11], ARGV[2])
end
consume()
if not stored then return {'kept'} end
return {'applied', n}
"""
_APPLY = LuaScript(_APPLY_LUA)


# KEYS: 1 stream, 2 dead letters, 3 order list (or the stream again: no session known).
# ARGV: 1 entry id, 2 group, 3 maxlen, then the dead-letter fields. Only an entry still
# in the stream is refused: one gone was applied (or refused) by another replica.
_REFUSE_LUA = """
if #redis.call('xrange', KEYS[1], ARGV[1], ARGV[1]) == 0 then return 0 end
redis.call('xadd', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', unpack(ARGV, 4))
redis.call('xack', KEYS[1], ARGV[2], ARGV[1])
redis.call('xdel', KEYS[1], ARGV[1])
if KEYS[3] ~= KEYS[1] then redis.call('lrem', KEYS[3], 1, ARGV[1]) end
return 1
"""
_REFUSE = LuaScript(_REFUSE_LUA)


class CompletionApplier:
    """Applies the entries of the apps' completions streams (consumer group GROUP)."""

    def __init__(
        self,
        runners: Mapping[str, Runner],
        client: aioredis.Redis,
        keys: Keys,
        resumer: SessionResumer,
        consumer: str,
        *,
        progress_to_model: bool = False,
    ) -> None:
        self._runners = {keys.completions(app): runner for app, runner in runners.items()}
        self._redis = client
        self._keys = keys
        # The runners share their replica's settings: its secret names mask the records.
        settings = next((r.settings for r in runners.values()), None)
        names = settings.secret_arg_names if settings else DEFAULT_SECRET_NAMES
        self.max_json_depth = settings.max_json_depth if settings else DEFAULT_MAX_JSON_DEPTH
        self._pending = PendingCalls(keys, names)
        self._resumer = resumer
        self._waiting = WaitingCalls(client, resumer)
        self._consumer = consumer
        self._progress_to_model = progress_to_model

    @property
    def streams(self) -> list[str]:
        """The completions streams of this replica's apps."""
        return list(self._runners)

    async def apply(self, stream: str, entry: PostedEntry) -> None:
        """Apply the entry (or refuse it), after every earlier completion of its session.
        The session is the one the completion names (its poster read it from the call's
        record); the record itself is read once, under that session's lease."""
        completion = entry.completion
        if isinstance(completion, str):
            await self.refuse(stream, entry, completion)
            return
        session = _session_of(completion)
        if session is None:
            unnamed = (
                f"the completion for call {completion.call_id!r} names no session: post it "
                "with Completions (post_result, confirm, cancel) or toolfleet's API"
            )
            await self.refuse(
                stream, entry, await self._why_not_pending(completion.call_id, unnamed)
            )
            return
        runner = self._runners[stream]
        async with runner.leases.hold(session, wait_s=self._resumer.lease_wait_s) as hold:
            await self._finish_open_turn(runner, session, hold)
            owed = False  # whether an applied entry gave the model something to answer
            for earlier in await self._earlier(stream, session, entry.entry_id):
                owed |= await self._apply_bounded(runner, stream, session, earlier, hold)
            owed |= await self._apply_bounded(runner, stream, session, entry, hold)
            if owed:  # once, for everything applied: the model answers it all at once
                await self._resumer.continue_session(runner, session, hold)

    async def refuse(
        self,
        stream: str,
        entry: PostedEntry,
        reason: str,
        session: SessionKey | None = None,
    ) -> None:
        """Keep the entry in the dead-letter stream with `reason`, and consume it (ack,
        delete, leave its session's order), in one step - if it is still in the stream."""
        order = self._keys.completion_order(session) if session else stream
        kept = dead_letter_fields(entry.kept(), reason)
        fields = [word for pair in kept.items() for word in pair]
        refused = await _REFUSE.run(
            self._redis, 3, stream, self._keys.dead_letters(), order,
            entry.entry_id, GROUP, DEAD_LETTERS_MAXLEN, *fields,
        )  # fmt: skip
        if refused:
            log.warning("refused completion %s: %s", entry.entry_id, reason)

    def _consumer_of(
        self, stream: str, entry_id: str, pending: PendingCall, completion: Completion
    ) -> Callable[[WriteBatch], None]:
        """Stages the entry's consumption into a caller's atomic step, with the record of
        what answered the call: a completion posted for it later is refused saying so."""

        def consume(batch: WriteBatch) -> None:
            self._stage_consume(batch, stream, entry_id, pending.session_key)
            claim = _claim(entry_id, pending.session_key, completion)
            batch.add("SET", self._keys.applied(pending.call_id), claim, "EX", APPLIED_TTL_S)

        return consume

    def _stage_consume(
        self, batch: WriteBatch, stream: str, entry_id: str, session: SessionKey | None
    ) -> None:
        batch.add("XACK", stream, GROUP, entry_id)
        batch.add("XDEL", stream, entry_id)
        if session is not None:
            batch.add("LREM", self._keys.completion_order(session), 1, entry_id)

    async def _why_not_pending(self, call_id: str, otherwise: str | None = None) -> str:
        """Why a completion for `call_id` has no call to apply to: answered already, or
        `otherwise` (by default: no such pending call)."""
        claim = await self._redis.get(self._keys.applied(call_id))
        if claim is not None:
            answer = json.loads(claim).get("answer")
            if answer:
                return f"call {call_id!r} was already answered: {answer}"
            return f"call {call_id!r} already has its final result"
        return otherwise or f"no pending call with id {call_id!r}"

    async def _finish_open_turn(self, runner: Runner, key: SessionKey, hold: LeaseHold) -> None:
        """A turn still open (its replica died mid-turn) is finished before anything else
        is appended to the session: the model never sees a call without its response."""
        try:
            session = await runner.store.get(key)
        except SessionNotFoundError:
            return  # the apply script refuses the completion, saying so
        if session.open_turn() is not None:
            log.info("session %s has an open turn: finishing it first", key)
            await self._resumer.continue_session(runner, key, hold, release=False)

    async def _earlier(self, stream: str, session: SessionKey, entry_id: str) -> list[PostedEntry]:
        """The session's completions accepted before `entry_id` and not yet applied,
        taken over by this consumer (we hold the session's lease: they are ours to do)."""
        order_key = self._keys.completion_order(session)
        order = [decoded(e) for e in await self._redis.lrange(order_key, 0, -1)]
        if entry_id not in order:
            return []
        earlier: list[PostedEntry] = []
        for earlier_id in order[: order.index(entry_id)]:
            claimed: Any = await self._redis.xclaim(
                stream, GROUP, self._consumer, min_idle_time=0, message_ids=[earlier_id]
            )
            fields = claimed[0][1] if claimed and claimed[0][1] else None
            if fields is None:  # deleted meanwhile (applied), or never read: read it now
                found: Any = await self._redis.xrange(stream, earlier_id, earlier_id)
                fields = found[0][1] if found else None
            if fields is None:
                await self._redis.lrem(order_key, 1, earlier_id)
                continue
            earlier.append(PostedEntry.read(earlier_id, fields, self.max_json_depth))
        return earlier

    async def _still_posted(
        self, stream: str, entry_id: str, call_id: str
    ) -> tuple[bool, PendingCall | None, bytes | None]:
        """Whether the entry is still in the stream (not applied or refused by anyone
        yet), and the call's pending record, parsed and as read: one round trip, the
        record's only read."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.xrange(stream, entry_id, entry_id)
        self._pending.stage_aget(pipe, call_id)
        found, record = await pipe.execute()
        return bool(found), self._pending.parsed(record), record

    async def _apply_bounded(
        self,
        runner: Runner,
        stream: str,
        session: SessionKey,
        entry: PostedEntry,
        hold: LeaseHold,
    ) -> bool:
        """`_apply_one`, its failures counted: an entry whose applying raised
        MAX_APPLY_FAILURES times is dead-lettered rather than tried again, for ever, by
        every later completion of its session, which applies it first. Redis and the
        lease failing are not the entry's failures: those are retried as they were."""
        try:
            return await self._apply_one(runner, stream, session, entry, hold)
        except (aioredis.RedisError, SessionError):
            raise
        except Exception as exc:
            key = self._keys.apply_failures(stream, entry.entry_id)
            failures, _ = await send_together(
                self._redis, [("INCR", key), ("EXPIRE", key, APPLY_FAILURES_TTL_S)]
            )
            if int(failures) < MAX_APPLY_FAILURES:
                raise
            log.exception("applying completion %s failed %d times", entry.entry_id, failures)
            reason = (
                f"applying it raised {type(exc).__name__} {failures} times (the replica's "
                "log has the tracebacks); set aside so that its session's later completions "
                "apply: post the call's result again"
            )
            await self.refuse(stream, entry, reason, session)
            await self._redis.delete(key)
            return False

    async def _apply_one(
        self,
        runner: Runner,
        stream: str,
        session: SessionKey,
        entry: PostedEntry,
        hold: LeaseHold,
    ) -> bool:
        """Apply (or refuse) one entry under the lease of `session`; True if the model now
        has something new to answer."""
        completion = entry.completion
        if isinstance(completion, str):  # refused only if still there: the script checks
            await self.refuse(stream, entry, completion, session)
            return False
        posted, pending, read = await self._still_posted(stream, entry.entry_id, completion.call_id)
        if not posted:
            return False  # applied or refused already (by us, as an earlier one, or another)
        if pending is None:
            reason = await self._why_not_pending(completion.call_id)
            await self.refuse(stream, entry, reason, session)
            return False
        foreign = _foreign(completion, pending, session)
        if foreign is not None:
            await self.refuse(stream, entry, foreign, session)
            return False
        if completion.kind == "cancel" and pending.kind != "result":
            return await self._waiting.apply(
                runner,
                pending,
                hold,
                self._consumer_of(stream, entry.entry_id, pending, completion),
                cancel=completion,
            )
        if completion.kind not in ("result", "cancel") or pending.kind != "result":
            if completion.kind != pending.kind:
                reason = f"{pending.call_id!r} expects a {pending.kind}"
                await self.refuse(stream, entry, reason, session)
                return False
            posted_for = completion.asked_again
            if posted_for is not None and posted_for != pending.asked_again:
                reason = (
                    f"{pending.call_id!r} asked again since this answer was posted (it "
                    "answered an earlier question): answer the question it asks now"
                )
                await self.refuse(stream, entry, reason, session)
                return False
            try:
                answer = _confirmation(pending, completion)
            except ValidationError as exc:
                reason = f"malformed confirmation for {pending.call_id!r}: {exc}"
                await self.refuse(stream, entry, reason, session)
                return False
            return await self._waiting.apply(
                runner,
                pending,
                hold,
                self._consumer_of(stream, entry.entry_id, pending, completion),
                answer,
            )
        applied = await self._script(stream, entry, completion, (pending, read or b""), hold)
        if applied is None:
            return False
        event, stored = applied
        await self._restart_idle_clock(runner, pending)
        # Watchers see every progress report, those past the session's bound too (kept in
        # the ticket's record alone): progress is news as it happens.
        await self._resumer.notify(session, event)
        if not stored:
            return False  # nothing stored: nothing new for the model
        if completion.kind == "cancel":
            return completion.resume
        return completion.final or self._progress_to_model

    async def _restart_idle_clock(self, runner: Runner, pending: PendingCall) -> None:
        """The event the script appended (or the ticket's record it updated) is a write to
        the session: its idle clock starts again, as a turn's writes start it (progress
        alone may come for weeks)."""
        ttl_s = runner.store.limits.ttl_s
        if ttl_s <= 0:
            return
        batch = WriteBatch()
        keys = idle_keys(self._keys, pending.session_key, pending.app_name, pending.user_id)
        batch.refresh_ttl(ttl_s, *keys)
        await batch.run(self._redis)

    async def _script(
        self,
        stream: str,
        entry: PostedEntry,
        completion: Completion,
        record: tuple[PendingCall, bytes],
        hold: LeaseHold,
    ) -> tuple[Event, bool] | None:
        """Run the apply script for `entry` (its parsed `completion`) on the call's
        record (parsed, and as read); the event applied and whether the session stored
        it (progress past PROGRESS_EVENTS_STORED is kept in the record alone), or None if
        refused (the script says why) or not due. Progress is applied again on the record
        as it is now if the worker wrote it meanwhile."""
        pending, read = record
        for _ in range(RECORD_TRIES):
            event = self._event(pending, completion)
            reply = await self._run_script(stream, entry, completion, pending, read, event, hold)
            if decoded(reply[0]) != "changed":
                break
            now: Any = await self._redis.hget(self._keys.pending(), completion.call_id)
            read, fresh = now, self._pending.parsed(now)
            if fresh is None:  # the worker took its ticket back: the call is over
                reason = await self._why_not_pending(completion.call_id)
                await self.refuse(stream, entry, reason, pending.session_key)
                return None
            pending = fresh
        return self._outcome(entry, completion, pending, reply, event)

    async def _run_script(
        self,
        stream: str,
        entry: PostedEntry,
        completion: Completion,
        pending: PendingCall,
        read: bytes,
        event: Event,
        hold: LeaseHold,
    ) -> Any:
        """One run of the apply script on the record `pending` (`read`: its text),
        appending `event`."""
        session = pending.session_key
        # A cancellation of the session closes the ticket without resuming the agent.
        mode = "final" if completion.resume else "closed"
        if not completion.final:
            progress = [*pending.progress, completion.response][-PROGRESS_KEPT:]
            mode = self._pending.record(pending.model_copy(update={"progress": progress}))
        keys = self._keys
        span = completion_span(pending, completion)
        reply: Any = await _APPLY.run(
            self._redis,
            13,
            hold.fence.key,
            keys.pending(),
            keys.applied(completion.call_id),
            keys.events(session),
            keys.resume(),
            stream,
            keys.completion_order(session),
            keys.closed(session, completion.call_id),
            keys.session(session),
            keys.dead_letters(),
            keys.session_pending(session),
            keys.pending_by_age(),
            keys.progress_stored(session, completion.call_id),
            hold.fence.token,
            completion.call_id,
            entry.entry_id,
            event.model_dump_json(exclude_defaults=True),
            session,
            GROUP,
            APPLIED_TTL_S,
            _claim(entry.entry_id, session, completion),
            entry.kept(),  # its dead letter, if refused
            json.dumps(time.time()),
            DEAD_LETTERS_MAXLEN,
            CLOSED_TTL_S,
            mode,
            read,
            PROGRESS_EVENTS_STORED,
            APPLIED_TTL_S,
        )
        tracing.finish(span, toolfleet__outcome=decoded(reply[0]))
        return reply

    def _event(self, pending: PendingCall, completion: Completion) -> Event:
        """The session event applying `completion` to the call `pending` appends."""
        event = _response_event(pending, completion)
        if not completion.final and not self._progress_to_model:
            event = event.model_copy(update={"content": None, "progress": completion.response})
        return event

    def _outcome(
        self,
        entry: PostedEntry,
        completion: Completion,
        pending: PendingCall,
        reply: Any,
        event: Event,
    ) -> tuple[Event, bool] | None:
        """`event` and whether it was appended, if the script's `reply` says it was
        applied (appended, or kept in the ticket's record alone), else None (logged why)."""
        outcome = decoded(reply[0])
        with guarded():
            metrics().completions.labels(outcome).inc()
        if outcome == "refused":
            log.warning("refused completion %s: %s", entry.entry_id, decoded(reply[1]))
        if outcome == "kept":
            log.info(
                "progress of %s kept in its ticket only: its session holds %d of its "
                "progress reports already",
                pending.call_id,
                PROGRESS_EVENTS_STORED,
            )
            return event, False
        if outcome != "applied":
            return None
        log.info(
            "applied the %s of %s (%s) from %s",
            "final result" if completion.final else "progress",
            pending.call_id,
            pending.tool,
            completion.source,
        )
        return event, True


def _claim(entry_id: str, session: str, completion: Completion) -> str:
    """The record of the completion that answered a call. Beside a final result it names
    any other answer (a person's confirmation or rejection, a credential, a cancellation),
    so that a later post is refused saying what answered the call."""
    claim: dict[str, object] = {"entry": entry_id, "session": session, "at": time.time()}
    if completion.kind == "cancel":
        claim["answer"] = "cancelled"
    elif completion.kind == "credential":
        claim["answer"] = "its credential was supplied"
    elif completion.kind == "confirmation":
        confirmed = completion.response.get("confirmed")
        claim["answer"] = "confirmed" if confirmed else "rejected"
    return json.dumps(claim)


def _foreign(completion: Completion, pending: PendingCall, session: SessionKey) -> str | None:
    """Why `completion`, applied under the lease of `session`, must not act on its call's
    record `pending`: the call belongs to another session than the one the completion
    names (an entry written past the poster). None when all three agree."""
    if pending.session_key == completion.session_key == session:
        return None
    return (
        f"completion names session {completion.session_key!r} but call "
        f"{pending.call_id!r} belongs to another session"
    )


def _confirmation(pending: PendingCall, completion: Completion) -> ToolConfirmation | None:
    """A confirmation's answer: the request (hint, payload) with what the person sent
    (`confirmed`, and the payload if they edited it); None for a credential."""
    if pending.kind != "confirmation":
        return None
    return posted_answer(pending.ticket, completion.response)


def _response_event(pending: PendingCall, completion: Completion) -> Event:
    """The posted result as the call's function response, under the original call id."""
    response = types.FunctionResponse(
        id=pending.call_id, name=pending.tool, response=completion.response
    )
    return Event(
        invocation_id=pending.invocation_id,
        author="completion",
        content=types.Content(role="user", parts=[types.Part(function_response=response)]),
        calls=(
            CallRecord(
                call_id=pending.call_id,
                tool=pending.tool,
                status=CallStatus.SUCCESS if completion.final else CallStatus.PENDING,
                worker=completion.source,
                started_at=pending.created_at,
                finished_at=completion.posted_at,
            ),
        ),
    )


def _session_of(completion: Completion) -> SessionKey | None:
    """The session a completion names (its call's, when it was posted), if any."""
    return SessionKey(completion.session_key) if completion.session_key else None
