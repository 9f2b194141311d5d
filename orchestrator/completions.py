"""Apply posted long-running results once and resume the agent (consumer group).

Each app's completions stream is read by the consumer group `orchestrators`; every
replica is one consumer. Per entry: claim the call (`SET NX` on the call id), record
the function response in the session under its lease, acknowledge, and run the
model on it. Entries a crashed replica left unacknowledged are taken over with
XAUTOCLAIM; refused completions go to the dead-letter stream.

The listener also finishes the work of replicas that died: every `owed_scan_s` it
continues each session that owes the model a turn and whose lease nobody holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

import redis.asyncio as aioredis
from google.genai import types
from pydantic import ValidationError

from orchestrator.connections import decoded, stop_task
from orchestrator.credentials import complete_parked_turn, rerun_with_credential
from orchestrator.loop import Update
from orchestrator.runner import Runner
from orchestrator.sessions import CallRecord, Event
from orchestrator.turn import responses_event
from shared.completions import DEAD_LETTERS_MAXLEN, dead_letter_fields
from shared.errors import SessionError
from shared.keys import Keys
from shared.messages import COMPLETION_FIELD, CallStatus, Completion, PendingCall

log = logging.getLogger(__name__)

GROUP = "orchestrators"
APPLIED_TTL_S = 7 * 24 * 3600  # how long a call id stays "already completed"
Notify = Callable[[str, Update], Awaitable[None] | None]


class CompletionListener:
    def __init__(
        self,
        runners: Mapping[str, Runner],
        client: aioredis.Redis,
        keys: Keys,
        consumer: str,
        *,
        on_update: Notify | None = None,
        progress_to_model: bool = False,
        claim_idle_ms: int = 30_000,
        block_ms: int = 2_000,
        lease_wait_s: float = 600.0,
        owed_scan_s: float = 10.0,
    ) -> None:
        self._runners = {keys.completions(app): runner for app, runner in runners.items()}
        self._redis = client  # dedicated: it blocks in XREADGROUP
        self._keys = keys
        self._consumer = consumer
        self._on_update = on_update
        self._progress_to_model = progress_to_model
        self._claim_idle_ms = claim_idle_ms
        self._block_ms = block_ms
        self._lease_wait_s = lease_wait_s
        self._owed_scan_s = owed_scan_s
        self._resuming: set[str] = set()  # sessions a task of this listener is continuing
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._handlers: set[asyncio.Task[None]] = set()
        self._session_locks: dict[str, asyncio.Lock] = {}
        self.handled = asyncio.Event()  # set after each entry is handled (for waiters)

    async def start(self) -> None:
        for stream in self._runners:
            with contextlib.suppress(aioredis.ResponseError):  # BUSYGROUP: exists already
                await self._redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
        self._task = asyncio.create_task(self._run(), name="toolfleet-completions")

    async def stop(self) -> None:
        self._stopping = True
        for task in [self._task, *self._handlers]:
            await stop_task(task, self._block_ms / 1000 + 1)

    async def _run(self) -> None:
        last_claim = last_scan = 0.0
        while not self._stopping:
            try:
                if time.monotonic() - last_scan > self._owed_scan_s:
                    last_scan = time.monotonic()
                    await self._resume_owed()
                if time.monotonic() - last_claim > self._claim_idle_ms / 2000:
                    last_claim = time.monotonic()
                    await self._take_over_stale()
                streams: Any = dict.fromkeys(self._runners, ">")
                response: Any = await self._redis.xreadgroup(
                    GROUP, self._consumer, streams, count=100, block=self._block_ms
                )
            except (aioredis.ConnectionError, aioredis.TimeoutError) as exc:
                if self._stopping:
                    return
                log.warning("completions read failed (%s); retrying", exc)
                await asyncio.sleep(0.5)  # back off while Redis is away
                continue
            for stream, entries in response or []:
                for entry_id, fields in entries:
                    self._spawn(decoded(stream), decoded(entry_id), fields)

    async def _take_over_stale(self) -> None:
        """Claim entries another (crashed) replica read but never acknowledged."""
        for stream in self._runners:
            reply: Any = await self._redis.xautoclaim(
                stream, GROUP, self._consumer, min_idle_time=self._claim_idle_ms, start_id="0-0"
            )
            for entry_id, fields in reply[1]:
                if fields:  # None for entries trimmed away meanwhile
                    log.info("took over completion %s from a stale consumer", decoded(entry_id))
                    self._spawn(stream, decoded(entry_id), fields)

    def _spawn(self, stream: str, entry_id: str, fields: dict[bytes, bytes]) -> None:
        self._start(self._handle_safely(stream, entry_id, fields))

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def _handle_safely(self, stream: str, entry_id: str, fields: dict[bytes, bytes]) -> None:
        try:
            await self._handle(stream, entry_id, fields)
        except Exception:
            # Left unacknowledged: a replica takes it over after claim_idle_ms.
            log.exception("completion %s on %s failed; it will be retried", entry_id, stream)
        finally:
            self.handled.set()

    async def _handle(self, stream: str, entry_id: str, fields: dict[bytes, bytes]) -> None:
        raw = fields.get(COMPLETION_FIELD.encode(), b"")
        try:
            completion = Completion.model_validate_json(raw)
        except ValidationError as exc:
            await self._refuse(stream, entry_id, raw, f"malformed completion: {exc}")
            return
        # First await of the task: completions of one session apply in posting order.
        async with self._lock(completion.session_id or completion.call_id):
            await self._handle_in_order(stream, entry_id, raw, completion)

    async def _handle_in_order(
        self, stream: str, entry_id: str, raw: bytes, completion: Completion
    ) -> None:
        runner = self._runners[stream]
        owner = await self._redis.get(self._keys.applied(completion.call_id))
        claim = json.loads(owner) if owner is not None else None
        if claim is not None and claim["entry"] == entry_id:
            # Applied by a replica that crashed before acknowledging: finish its work.
            await self._redis.xack(stream, GROUP, entry_id)
            await self._resume_if_owed(runner, claim["session"])
            return
        pending_raw = await self._redis.hget(self._keys.pending(), completion.call_id)
        if pending_raw is None:
            reason = (
                f"call {completion.call_id!r} already has its final result"
                if owner is not None
                else f"no pending call with id {completion.call_id!r}"
            )
            await self._refuse(stream, entry_id, raw, reason)
            return
        pending = PendingCall.model_validate_json(pending_raw)
        async with runner.lease(pending.session_id, wait_s=self._lease_wait_s):
            if completion.kind == "credential" or pending.kind == "credential":
                if completion.kind != pending.kind:
                    await self._refuse(
                        stream, entry_id, raw, f"{pending.call_id!r} expects a {pending.kind}"
                    )
                    return
                await self._apply_credential(runner, stream, entry_id, pending)
            elif completion.final:
                await self._apply_final(runner, stream, entry_id, raw, completion, pending)
            else:
                await self._apply_progress(runner, stream, entry_id, completion, pending)

    def _lock(self, session_id: str) -> asyncio.Lock:
        return self._session_locks.setdefault(session_id, asyncio.Lock())

    async def _apply_final(
        self,
        runner: Runner,
        stream: str,
        entry_id: str,
        raw: bytes,
        completion: Completion,
        pending: PendingCall,
    ) -> None:
        claim = json.dumps({"entry": entry_id, "session": pending.session_id})
        key = self._keys.applied(completion.call_id)
        if not await self._redis.set(key, claim, nx=True, ex=APPLIED_TTL_S):
            await self._refuse(
                stream, entry_id, raw, f"duplicate final result for {completion.call_id!r}"
            )
            return
        session = await runner.store.get(pending.session_id)
        event = _response_event(pending, completion)
        await runner.store.append(session, event, resolved=pending)
        await self._redis.xack(stream, GROUP, entry_id)
        log.info(
            "applied the final result of %s (%s) from %s",
            pending.call_id,
            pending.tool,
            completion.source,
        )
        await self._notify(session.id, event)
        await self._continue(runner, pending.session_id)

    async def _apply_credential(
        self, runner: Runner, stream: str, entry_id: str, pending: PendingCall
    ) -> None:
        """The user supplied a credential: run the call again; finish the turn if complete."""
        session = await runner.store.get(pending.session_id)
        result = await rerun_with_credential(runner, session, pending)
        if result.actions.requested_auth:  # still missing, or rejected by the tool
            updated = pending.model_copy(update={"ticket": result.actions.requested_auth})
            event = Event(
                invocation_id=pending.invocation_id,
                author=pending.agent,
                credential_requests=[
                    {
                        "call_id": pending.call_id,
                        "tool": pending.tool,
                        "auth_config": updated.ticket,
                    }
                ],
            )
            await runner.store.append(session, event, pending=[updated])
            await self._redis.xack(stream, GROUP, entry_id)
            await self._notify(session.id, event)
            return
        ordered = await complete_parked_turn(runner, pending, result)
        await self._redis.xack(stream, GROUP, entry_id)
        if ordered is None:
            return  # another call of the turn still waits for its credential
        event = responses_event(pending.invocation_id, pending.agent, ordered)
        await runner.store.append(session, event, resolved=pending)
        await self._notify(session.id, event)
        await self._continue(runner, session.id)

    async def _apply_progress(
        self,
        runner: Runner,
        stream: str,
        entry_id: str,
        completion: Completion,
        pending: PendingCall,
    ) -> None:
        session = await runner.store.get(pending.session_id)
        updated = pending.model_copy(update={"progress": [*pending.progress, completion.response]})
        event = _response_event(pending, completion)
        if not self._progress_to_model:
            event = event.model_copy(update={"content": None, "progress": completion.response})
        await runner.store.append(session, event, pending=[updated])
        await self._redis.xack(stream, GROUP, entry_id)
        await self._notify(session.id, event)
        if self._progress_to_model:
            await self._continue(runner, session.id)

    async def _continue(self, runner: Runner, session_id: str) -> None:
        """Run the model on the session as it stands (lease held by the caller)."""
        session = await runner.store.get(session_id)
        async for update in runner.invoke(session, None):
            await self._notify(session_id, update)

    async def _resume_owed(self) -> None:
        """Continue sessions owing the model a turn that no replica is running: their
        invocation died with its replica, or a result was applied and never answered."""
        store = next(iter(self._runners.values())).store  # all share one Redis and prefix
        owed = await store.sessions_to_resume()
        for session_id in await store.unleased(owed):
            if session_id in self._resuming:
                continue
            app = await store.app_of(session_id)
            runner = self._runners.get(self._keys.completions(app or ""))
            if runner is None:
                continue  # another app's session: its own orchestrator finishes it
            self._resuming.add(session_id)
            self._start(self._resume_one(runner, session_id))

    async def _resume_one(self, runner: Runner, session_id: str) -> None:
        try:
            async with self._lock(session_id), runner.lease(session_id):
                if session_id in await runner.store.sessions_to_resume():
                    log.info("continuing session %s (its invocation did not finish)", session_id)
                    await self._continue(runner, session_id)
        except SessionError:
            pass  # another replica took it first
        except Exception:
            # One broken session must not stop the listener; it stays owed.
            log.exception("continuing session %s failed; it stays owed", session_id)
        finally:
            self._resuming.discard(session_id)

    async def _resume_if_owed(self, runner: Runner, session_id: str) -> None:
        async with runner.lease(session_id, wait_s=self._lease_wait_s):
            if session_id in await runner.store.sessions_to_resume():
                await self._continue(runner, session_id)

    async def _refuse(self, stream: str, entry_id: str, raw: bytes, reason: str) -> None:
        log.warning("refused completion %s: %s", entry_id, reason)
        await self._redis.xadd(
            self._keys.dead_letters(),
            dead_letter_fields(raw, reason),  # type: ignore[arg-type]
            maxlen=DEAD_LETTERS_MAXLEN,
            approximate=True,
        )
        await self._redis.xack(stream, GROUP, entry_id)

    async def _notify(self, session_id: str, update: Update) -> None:
        if self._on_update is not None:
            result = self._on_update(session_id, update)
            if result is not None:
                await result


def _response_event(pending: PendingCall, completion: Completion) -> Event:
    """The posted result as the call's function response, under the original call id."""
    response = types.FunctionResponse(
        id=pending.call_id, name=pending.tool, response=completion.response
    )
    return Event(
        invocation_id=pending.invocation_id,
        author="completion",
        content=types.Content(role="user", parts=[types.Part(function_response=response)]),
        calls=[
            CallRecord(
                call_id=pending.call_id,
                tool=pending.tool,
                status=CallStatus.SUCCESS if completion.final else CallStatus.PENDING,
                worker=completion.source,
                started_at=pending.created_at,
                finished_at=completion.posted_at,
            )
        ],
    )
