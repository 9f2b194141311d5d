"""Wait for ToolResults with one blocking XREAD.

No thread per call and no Celery AsyncResult: futures keyed by call id, resolved by a
single reader task. A result whose call nobody awaits (it missed its deadline, or was
answered already) is logged and dropped - exactly one result per call id is delivered.

A result is posted to its session's stream, and a copy to the results feed (naming the
stream and entry) in the same step. The reader blocks on the feed, not on the streams of
every session it waits for: a read that named all 200 streams of 200 sessions cost the
orchestrator and Redis O(sessions) per result. It reads a session's stream
itself when it starts watching it (results posted before, such as those of a session
taken over), when the feed names a result too large to copy, and every SWEEP_S. The
feed keeps only its newest entries, numbered: when the entries a read returns do not
follow the last one read, the reader fell behind its trimming, and takes none of them;
it reads every session stream it watches instead, from where it left each. (Taking the
copies after a gap would skip, on their stream, the results trimmed in the gap.)

While many calls are awaited, it pauses briefly after each read that let a session go on
(answered the last call it awaited), so that it takes the next ones in a batch
(read_batching.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from pydantic import ValidationError

from toolfleet.orchestrator.connections import decoded, stop_task
from toolfleet.orchestrator.fleet.read_batching import ReadBatching
from toolfleet.shared.batch import WriteBatch
from toolfleet.shared.cancellation import CANCEL_FIELD, CancelRequest
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import (
    FEED_ENTRY_FIELD,
    FEED_NUMBER_FIELD,
    FEED_STREAM_FIELD,
    RESULT_FIELD,
    ToolResult,
)
from toolfleet.shared.signing import SIGNATURE_FIELD, ResultSigner

log = logging.getLogger(__name__)

BLOCK_MS = 5_000
# How often the watched streams themselves are read, beside the feed.
SWEEP_S = 1.0


@dataclass
class _Watch:
    last_id: str = "0-0"
    delivered_up_to: str | None = None  # newest entry id handed to a waiting call
    settled: bool = False  # everything delivered has been persisted by the caller


@dataclass
class _Awaited:
    """A call waited for, and what its result must claim to be accepted (when known)."""

    stream: str
    future: asyncio.Future[ToolResult]
    session_id: str | None = None
    tool: str | None = None


class ResultWaiter:
    """Resolves the futures of awaited calls from results streams, read by one task.

    `reader` must be a connection of its own: it spends its time blocked in XREAD;
    `writer` trims streams and interrupts that read when a new stream is to be watched.
    """

    def __init__(
        self,
        reader: aioredis.Redis,
        writer: aioredis.Redis,
        keys: Keys,
        replica_id: str,
        block_ms: int = BLOCK_MS,
        signer: ResultSigner | None = None,
        on_cancel: Callable[[CancelRequest], None] | None = None,
        batching: ReadBatching | None = None,
    ):
        # `reader` is dedicated: its connection spends most of its life inside XREAD BLOCK.
        self._reader = reader
        self._writer = writer
        self._signer = signer  # with the fleet key: only results it signed are accepted
        self._wake_key = keys.wake(replica_id)
        self._wake_last = "0-0"
        # Session cancellations, read with the results (one XREAD for all).
        self._on_cancel = on_cancel
        self._cancels_key = keys.cancels()
        self._cancels_last = "0-0"
        self._feed_key = keys.results_feed()
        self._feed_count_key = keys.results_feed_count()
        self._feed_last = "0-0"
        self._feed_number: int | None = None  # of the feed's last entry read (None: unknown)
        self._unchecked: set[str] = set()  # watched streams no read has named yet
        self._next_sweep = 0.0  # monotonic time
        self._pending: dict[str, _Awaited] = {}  # by call id
        self._awaited_on: Counter[str] = Counter()  # calls of _pending, by stream
        self._watches: dict[str, _Watch] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._reading = False
        self._woken = False  # a wake-up is sent for the read in progress
        self._block_ms = block_ms
        # When the reader pauses between reads to take results in batches.
        self.batching = batching or ReadBatching.off()
        self.last_outage_at = 0.0  # monotonic time of the last failed read (Redis away)

    async def start(self) -> None:
        """Start the reader task, after clearing this replica's wake stream."""
        await self._writer.delete(self._wake_key)
        # Only cancellations from now on: earlier ones were for invocations of the past;
        # the feed alike (what is there already, the streams' first reads find).
        self._cancels_last = await self._newest(self._cancels_key)
        await self._start_feed()
        self._task = asyncio.create_task(self._run(), name="toolfleet-result-waiter")

    async def _start_feed(self) -> None:
        """Read the feed from its newest entry on, knowing that entry's number: the
        counter and the stream read together, so no post falls in between."""
        pipe = self._writer.pipeline(transaction=True)
        pipe.get(self._feed_count_key)
        pipe.xrevrange(self._feed_key, count=1)
        count, newest = await pipe.execute()
        # No counter yet: nothing was posted. One that is not a number is unknown: the
        # first read is not trusted to follow on (the post script numbers it anew).
        self._feed_number = 0 if count is None else _number(count)
        self._feed_last = decoded(newest[0][0]) if newest else "0-0"

    async def _newest(self, stream: str) -> str:
        newest: Any = await self._writer.xrevrange(stream, count=1)
        return decoded(newest[0][0]) if newest else "0-0"

    async def stop(self) -> None:
        """Stop the reader task and cancel every future still waiting for a result."""
        self._stopping = True
        await stop_task(self._task, self._block_ms / 1000 + 1)
        for awaited in self._pending.values():
            awaited.future.cancel()
        self._pending.clear()
        self._awaited_on.clear()
        await self._writer.delete(self._wake_key)

    async def expect(
        self,
        stream: str,
        call_ids: list[str],
        *,
        session_id: str | None = None,
        tools: Mapping[str, str] | None = None,
        reread: bool = False,
    ) -> dict[str, asyncio.Future[ToolResult]]:
        """Register futures before dispatching, so no result can slip past.

        A result is accepted for a call only on `stream`, and only if it names
        `session_id` and the call's tool in `tools` (call id -> tool), when given.
        `reread`: the calls may have been sent before (a resumed turn): unless others are
        awaited there, the stream is read again from its start, for results delivered
        here before whose caller failed before persisting them (it trims what it did).
        """
        loop = asyncio.get_running_loop()
        futures = {call_id: loop.create_future() for call_id in call_ids}
        rewind = reread and stream not in self._awaited_on
        watch = None if rewind else self._watches.get(stream)
        for call_id, future in futures.items():
            tool = tools.get(call_id) if tools else None
            self._take(call_id)  # expected again: only the newest future is awaited
            self._pending[call_id] = _Awaited(stream, future, session_id, tool)
        self._awaited_on[stream] += len(futures)
        if watch is not None:
            watch.settled = False
        else:
            self._watches[stream] = _Watch()
            self._unchecked.add(stream)
            if self._reading and not self._woken:
                # Interrupt the XREAD in progress so that the next one reads the new stream
                # (for what it holds already); once per read: the next one names every
                # stream watched since.
                self._woken = True
                try:
                    await self._writer.xadd(self._wake_key, {"w": "1"}, maxlen=16, approximate=True)
                except BaseException:
                    self._woken = False
                    raise
        return futures

    def forget(self, call_id: str) -> None:
        """Stop waiting for a call (deadline passed); a late result will be dropped."""
        awaited = self._take(call_id)
        if awaited is not None and not awaited.future.done():
            awaited.future.cancel()

    def answer(self, result: ToolResult) -> bool:
        """Resolve the awaited call with `result` (the orchestrator's own answer, such as a
        cancellation), unless its result is in already; a later one is dropped."""
        awaited = self._take(result.call_id)
        if awaited is None or awaited.future.done():
            return False
        awaited.future.set_result(result)
        return True

    async def settle(self, stream: str, forget: str | None = None) -> None:
        """The caller persisted what it was given: trim the stream up to it (and delete
        the key `forget`, in the same round trip)."""
        batch = WriteBatch()
        self.stage_settle(batch, stream, forget)
        await batch.run(self._writer)

    def stage_settle(self, batch: WriteBatch, stream: str, forget: str | None = None) -> None:
        """`settle` as commands in the caller's transaction - the one that persists what
        was delivered, so trimming never runs ahead of persisting: a crash in between
        leaves the results on the stream for the next reader."""
        watch = self._watches.get(stream)
        if watch is not None and watch.delivered_up_to is not None:
            batch.xtrim_minid(stream, _next_id(watch.delivered_up_to))
        if forget is not None:
            batch.delete(forget)
        if watch is not None:
            watch.settled = True

    async def _run(self) -> None:
        while not self._stopping:
            checking = self._streams_to_read()
            streams = {stream: self._watches[stream].last_id for stream in checking}
            streams[self._feed_key] = self._feed_last
            streams[self._wake_key] = self._wake_last
            if self._on_cancel is not None:
                streams[self._cancels_key] = self._cancels_last
            block_ms = self._block_ms
            if self._watches:  # block no later than the next sweep is due
                until_sweep_ms = int((self._next_sweep - time.monotonic()) * 1000)
                block_ms = max(1, min(block_ms, until_sweep_ms))
            self._reading, self._woken = True, False
            try:
                # The command itself: redis-py's `xread` wraps each reply in a coroutine that
                # walks it for its stream-lag metric, a cost per result.
                response: Any = await self._reader.execute_command(  # type: ignore[no-untyped-call]
                    "XREAD", "BLOCK", block_ms, "STREAMS", *streams, *streams.values()
                )
            except (aioredis.ConnectionError, aioredis.TimeoutError) as exc:
                self._unchecked |= checking
                if self._stopping:
                    return
                self.last_outage_at = time.monotonic()
                log.warning("result stream read failed (%s); retrying", exc)
                await asyncio.sleep(0.5)  # back off while Redis is away
                continue
            finally:
                self._reading = False
            went_on = self._handle(response or [])
            if self.batching.due(went_on, len(self._pending)):
                await self.batching.pause()

    def _take(self, call_id: str) -> _Awaited | None:
        """The call's entry, no longer awaited (None: it was not)."""
        awaited = self._pending.pop(call_id, None)
        if awaited is not None:
            left = self._awaited_on[awaited.stream] - 1
            if left:
                self._awaited_on[awaited.stream] = left
            else:
                del self._awaited_on[awaited.stream]
        return awaited

    def _streams_to_read(self) -> set[str]:
        """The session streams the next read names besides the feed: every watched one
        when a sweep is due, else those watched since the last read and those the feed
        named a result of without a copy."""
        checking, self._unchecked = self._unchecked, set()
        now = time.monotonic()
        if now >= self._next_sweep:
            self._next_sweep = now + SWEEP_S
            self._drop_idle_watches()
            checking = set(self._watches)
        return checking & self._watches.keys()

    def _handle(self, response: list[Any]) -> int:
        """Deliver what a read returned: a session stream's own entries before the feed's,
        whose copies of them are then skipped as read already (by entry id). The number
        of streams whose last awaited call it answered: their sessions go on."""
        delivered: set[str] = set()  # streams a result was delivered on
        feed: list[Any] = []
        for stream_raw, entries in response:
            stream = decoded(stream_raw)
            if stream == self._feed_key:
                self._feed_last = decoded(entries[-1][0])
                feed = entries
            elif stream == self._wake_key:
                self._wake_last = decoded(entries[-1][0])
            elif stream == self._cancels_key:
                self._cancels_last = decoded(entries[-1][0])
                self._cancelled(entries)
            else:
                for entry_id, fields in entries:
                    if self._delivered(stream, decoded(entry_id), fields):
                        delivered.add(stream)
        if feed and self._feed_gap(feed):
            # Results were trimmed off the feed unread: each watched stream is read from
            # where this reader left it, and the copies of this read wait there too.
            self._unchecked |= self._watches.keys()
            feed = []
        for feed_id, fields in feed:
            # Any bytes at all may be written there: a name that is no text names no
            # stream watched.
            stream = _text(fields.get(FEED_STREAM_FIELD.encode()))
            # Not watched: another replica's session. Watched but not read yet: that
            # first read returns this entry, and what came before it.
            if stream not in self._watches or stream in self._unchecked:
                continue
            if RESULT_FIELD.encode() not in fields:  # too large to copy: read it there
                self._unchecked.add(stream)
                continue
            entry_id = _text(fields.get(FEED_ENTRY_FIELD.encode()))
            copied = decoded(feed_id)
            if self._delivered(stream, entry_id, fields, copied_at=copied):
                delivered.add(stream)
        return sum(stream not in self._awaited_on for stream in delivered)

    def _delivered(
        self,
        stream: str,
        entry_id: str,
        fields: dict[bytes, bytes],
        *,
        copied_at: str | None = None,
    ) -> bool:
        """`_deliver`, an entry that makes it raise logged and passed over: one entry,
        whatever it holds, never ends the reading of every session's results."""
        try:
            return self._deliver(stream, entry_id, fields, copied_at=copied_at)
        except Exception:
            log.exception("passed over entry %s of %s: it could not be read", entry_id, stream)
            return False

    def _feed_gap(self, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> bool:
        """Whether the feed's `entries` (one read's, in order) do not follow the entry
        read last, one number after another; the last one's number is kept."""
        expected, gap, skipped, renumbered = self._feed_number, False, 0, False
        for _, fields in entries:
            number = _number(fields.get(FEED_NUMBER_FIELD.encode()))
            if expected is None or number is None:
                gap = True  # not known to follow on (an older worker's entry)
            elif number > expected + 1:
                gap, skipped = True, skipped + number - expected - 1
            elif number != expected + 1:  # the counter was lost: Redis restarted empty
                gap = renumbered = True
            expected = number
        self._feed_number = expected
        if skipped:
            log.info(
                "results feed: %d entries were trimmed before this replica read them (it "
                "fell behind); reading its sessions' streams for them", skipped,
            )  # fmt: skip
        if renumbered:
            log.info(
                "results feed: numbered anew (Redis restarted or failed over); reading its "
                "sessions' streams for results it may not have read"
            )
        return gap

    def _cancelled(self, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> None:
        for entry_id, fields in entries:
            try:
                request = CancelRequest.model_validate_json(fields.get(CANCEL_FIELD.encode(), b""))
            except ValidationError as exc:
                log.error("ignored a malformed cancellation %s: %s", decoded(entry_id), exc)
                continue
            assert self._on_cancel is not None
            try:
                self._on_cancel(request)
            except Exception:  # one request never ends the reading of every result
                log.exception("could not apply the cancellation %s", decoded(entry_id))

    def _deliver(
        self,
        stream: str,
        entry_id: str,
        fields: dict[bytes, bytes],
        *,
        copied_at: str | None = None,
    ) -> bool:
        """Hand the entry's result to the call waiting for it; whether one got it.
        `copied_at`: the entry is the feed's copy, that feed entry's own id.

        The stream is read on from the last entry read there or delivered from the feed.
        An entry read from the stream is passed whatever it holds (its id is Redis's); a
        feed entry only names the stream entry it copies, unsigned, so its copy moves the
        reading on only once its result is taken - and never past the feed entry itself,
        which the post adds after the stream's: a forged one cannot make the reader skip
        the stream's real entries."""
        watch = self._watches[stream]
        position = _position(entry_id)
        if position is None:
            log.error("rejected a feed entry for %s naming no entry id (%r)", stream, entry_id)
            return False
        if position <= (_position(watch.last_id) or (0, 0)):
            return False  # read already, from the stream itself or from the feed
        if copied_at is None:
            watch.last_id = entry_id
        elif position[0] > (_position(copied_at) or (0, 0))[0]:
            log.error(
                "rejected feed entry %s: it names entry %s of %s, later than itself",
                copied_at, entry_id, stream,
            )  # fmt: skip
            return False
        raw = fields.get(RESULT_FIELD.encode())
        if self._signer is not None and not self._signer.valid(
            raw or b"", fields.get(SIGNATURE_FIELD.encode())
        ):
            # Forged, or from a worker with another TOOLFLEET_FLEET_KEY: the call still
            # waits. Name the claimed sender, so a misconfigured worker is found at once.
            log.error(
                "rejected entry %s on %s: no valid fleet-key signature (it claims to come from "
                "worker %r: is TOOLFLEET_FLEET_KEY the same there as here?)",
                entry_id, stream, _claimed_worker(raw),
            )  # fmt: skip
            return False
        try:
            result = ToolResult.model_validate_json(raw or b"")
        except ValidationError as exc:
            log.error("rejected a malformed entry %s on %s: %s", entry_id, stream, exc)
            return False
        awaited = self._pending.get(result.call_id)
        if awaited is None or awaited.stream != stream:
            log.info(
                "ignored a result for call %s (%s) that nobody awaits", result.call_id, result.tool
            )
            return False
        session_id, tool = awaited.session_id, awaited.tool
        if (session_id is not None and result.session_id != session_id) or (
            tool is not None and result.tool != tool
        ):
            # Forged or misrouted: the call still waits for its real result.
            log.error(
                "rejected entry %s on %s: a result for call %s of session %r, tool %r; "
                "the call awaited there is of session %r, tool %r",
                entry_id, stream, result.call_id, result.session_id, result.tool, session_id, tool,
            )  # fmt: skip
            return False
        self._take(result.call_id)
        watch.last_id = entry_id  # later than the last read: checked above
        watch.delivered_up_to = entry_id
        if awaited.future.done():
            return False
        awaited.future.set_result(result)
        return True

    def _drop_idle_watches(self) -> None:
        busy = self._awaited_on
        for stream in [s for s, w in self._watches.items() if w.settled and s not in busy]:
            del self._watches[stream]
            self._unchecked.discard(stream)


def _claimed_worker(raw: bytes | None) -> str:
    """The `worker` an unverified entry names (only for the log; never trusted)."""
    try:
        return str(json.loads(raw or b"{}").get("worker", "?"))[:200]
    except (ValueError, AttributeError):
        return "?"


def _text(raw: bytes | None) -> str:
    """A feed entry's field as text; bytes that are not UTF-8 read as replacement
    characters (no stream or entry id holds one)."""
    return raw.decode("utf-8", "replace") if raw else ""


def _number(raw: bytes | None) -> int | None:
    """A feed entry's number (None when it has none: posted by an older worker)."""
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _position(entry_id: str) -> tuple[int, int] | None:
    """A stream entry id as numbers, to compare (None if it is not one)."""
    millis, _, seq = entry_id.partition("-")
    try:
        return int(millis), int(seq or 0)
    except ValueError:
        return None


def _next_id(entry_id: str) -> str:
    millis, seq = entry_id.split("-")
    return f"{millis}-{int(seq) + 1}"
