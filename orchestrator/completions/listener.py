"""Read posted long-running results from the apps' completions streams and apply each
once (consumer group `orchestrators`; every replica is one consumer).

Per entry: parse it, then apply it under the session's lock (CompletionApplier). At
most `max_applying` entries are applied at once (each may resume its session: a model
turn held in memory); the listener reads more only once there is room, so the others
wait in the stream, not in the replica's memory, and a backlog of any size costs the
same.
Entries a crashed replica left unacknowledged are taken over with XAUTOCLAIM; entries
every consumer is done with are trimmed at the same pace. The
listener also finishes the work of replicas that died: every `owed_scan_s` it
continues each session that owes the model a turn and whose lease nobody holds. At the
pace of the take-over it removes the tickets of sessions that expired while their calls
waited (nothing else would: no completion may come for them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Mapping
from typing import Any

import redis.asyncio as aioredis

from toolfleet.orchestrator.completions.applier import GROUP, CompletionApplier
from toolfleet.orchestrator.completions.entries import PostedEntry
from toolfleet.orchestrator.completions.resumer import BackgroundTasks, Notify, SessionResumer
from toolfleet.orchestrator.connections import decoded, stop_task
from toolfleet.orchestrator.loop.runner import Runner
from toolfleet.shared.completions import TRIM_COMPLETIONS
from toolfleet.shared.keys import Keys
from toolfleet.shared.pending import PendingCalls

log = logging.getLogger(__name__)

# Completion entries one replica applies at once (each may resume its session).
MAX_APPLYING = 256
# Entries read (or taken over) per request at most.
READ_COUNT = 100
# The wait after a step of the read loop failed otherwise than by a lost connection.
STEP_BACKOFF_S = 1.0


class CompletionListener:
    """`await listener.start()` ... `await listener.stop()`: one task reading the
    streams, one task per entry applying it, at most `max_applying` at a time."""

    def __init__(
        self,
        runners: Mapping[str, Runner],
        client: aioredis.Redis,
        keys: Keys,
        consumer: str,
        *,
        commands: aioredis.Redis | None = None,
        on_update: Notify | None = None,
        progress_to_model: bool = False,
        claim_idle_ms: int = 30_000,
        block_ms: int = 2_000,
        lease_wait_s: float = 600.0,
        owed_scan_s: float = 10.0,
        max_applying: int = MAX_APPLYING,
        session_ttl_s: int = 0,
    ) -> None:
        if max_applying < 1:
            raise ValueError(f"max_applying is {max_applying}; it must be 1 or more")
        self._redis = client  # dedicated: it blocks in XREADGROUP
        self._consumer = consumer
        self._claim_idle_ms = claim_idle_ms
        self._block_ms = block_ms
        self._owed_scan_s = owed_scan_s
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._tasks = BackgroundTasks()  # entries being applied, sessions being continued
        self._max_applying = max_applying
        self._applying = 0  # entries read and not yet handled
        self._room = asyncio.Event()  # set when an entry is done
        self.resumer = SessionResumer(
            runners, self._tasks, on_update=on_update, lease_wait_s=lease_wait_s
        )
        # The applier's commands go through the replica's client (it rides out a short
        # outage); `client` is dedicated to the blocking read.
        self.applier = CompletionApplier(
            runners,
            commands or client,
            keys,
            self.resumer,
            consumer,
            progress_to_model=progress_to_model,
        )
        self.handled = asyncio.Event()  # set after each entry is handled (for waiters)
        # Records of calls whose session expired (TOOLFLEET_SESSION_TTL_S; 0: never) go,
        # a step per look, from the oldest on.
        self._session_ttl_s = session_ttl_s
        self._pending = PendingCalls(keys)
        self._swept_after = -math.inf

    async def start(self) -> None:
        """Create the consumer group if needed and start reading."""
        for stream in self.applier.streams:
            with contextlib.suppress(aioredis.ResponseError):  # BUSYGROUP: exists already
                await self._redis.xgroup_create(stream, GROUP, id="0", mkstream=True)
        self._task = asyncio.create_task(self._run(), name="toolfleet-completions")

    async def stop(self) -> None:
        """Stop reading and cancel the entries being applied (they are taken over)."""
        self._stopping = True
        for task in [self._task, *self._tasks]:
            await stop_task(task, self._block_ms / 1000 + 1)

    async def _run(self) -> None:
        last_claim = last_scan = 0.0
        while not self._stopping:
            try:
                if time.monotonic() - last_scan > self._owed_scan_s:
                    last_scan = time.monotonic()
                    await self.resumer.resume_owed()
                await self._wait_for_room()
                if time.monotonic() - last_claim > self._claim_idle_ms / 2000:
                    last_claim = time.monotonic()
                    await self._take_over_stale()
                    await self._trim()
                    await self._sweep_orphans()
                room = self._max_applying - self._applying
                if room <= 0:
                    continue
                streams: Any = dict.fromkeys(self.applier.streams, ">")
                response: Any = await self._redis.xreadgroup(
                    GROUP,
                    self._consumer,
                    streams,
                    count=min(READ_COUNT, room),
                    block=self._block_ms,
                )
            except (aioredis.ConnectionError, aioredis.TimeoutError) as exc:
                if self._stopping:
                    return
                log.warning("completions read failed (%s); retrying", exc)
                await asyncio.sleep(0.5)  # back off while Redis is away
                continue
            except Exception:
                # Redis refusing a command (out of memory, a key of the wrong type) or a
                # step's own error: this task is the replica's only reader, and ending
                # it would leave every later completion unapplied here.
                if self._stopping:
                    return
                log.exception("completions step failed; retrying in %.1f s", STEP_BACKOFF_S)
                await asyncio.sleep(STEP_BACKOFF_S)
                continue
            for stream, entries in response or []:
                for entry_id, fields in entries:
                    self._spawn(decoded(stream), decoded(entry_id), fields)

    async def _wait_for_room(self) -> None:
        """Return once there is room for a read's worth of entries (a quarter of
        `max_applying`, at most READ_COUNT): a backlog is read in parts, not one entry
        per request as each one finishes."""
        wanted = max(1, min(READ_COUNT, self._max_applying // 4))
        while self._max_applying - self._applying < wanted:
            self._room.clear()
            await self._room.wait()

    async def _take_over_stale(self) -> None:
        """Claim entries another (crashed) replica read but never acknowledged, as many
        as there is room for (the rest at the next look)."""
        for stream in self.applier.streams:
            room = self._max_applying - self._applying
            if room <= 0:
                return
            reply: Any = await self._redis.xautoclaim(
                stream,
                GROUP,
                self._consumer,
                min_idle_time=self._claim_idle_ms,
                start_id="0-0",
                count=min(READ_COUNT, room),
            )
            for entry_id, fields in reply[1]:
                if fields:  # None for entries trimmed away meanwhile
                    log.info("took over completion %s from a stale consumer", decoded(entry_id))
                    self._spawn(stream, decoded(entry_id), fields)

    async def _trim(self) -> None:
        """Drop the entries the group is done with (applied ones leave tombstones), never
        one that is unread or read and not acknowledged."""
        for stream in self.applier.streams:
            await TRIM_COMPLETIONS.run(self._redis, 1, stream, GROUP)

    async def _sweep_orphans(self) -> None:
        """Remove the next step's records of calls whose session expired while they
        waited: no completion may ever come for them, and nothing else removes them."""
        if self._session_ttl_s <= 0:
            return
        expired_before = time.time() - self._session_ttl_s
        dropped, goes_on = await self._pending.asweep_orphans(
            self._redis, expired_before, self._swept_after
        )
        self._swept_after = -math.inf if goes_on is None else goes_on
        if dropped:
            log.info("removed %d tickets whose session expired", dropped)

    def _spawn(self, stream: str, entry_id: str, fields: dict[bytes, bytes]) -> None:
        self._applying += 1
        self._tasks.spawn(self._handle_safely(stream, entry_id, fields))

    async def _handle_safely(self, stream: str, entry_id: str, fields: dict[bytes, bytes]) -> None:
        try:
            await self._handle(stream, entry_id, fields)
        except Exception:
            # Left unacknowledged: a replica takes it over after claim_idle_ms.
            log.exception("completion %s on %s failed; it will be retried", entry_id, stream)
        finally:
            self._applying -= 1
            self._room.set()
            self.handled.set()

    async def _handle(self, stream: str, entry_id: str, fields: dict[bytes, bytes]) -> None:
        entry = PostedEntry.read(entry_id, fields, self.applier.max_json_depth)
        completion = entry.completion
        if isinstance(completion, str):
            await self.applier.refuse(stream, entry, completion)
            return
        # First await of the task: completions of one session apply in posting order.
        async with self.resumer.lock(completion.session_key or completion.call_id):
            await self.applier.apply(stream, entry)
