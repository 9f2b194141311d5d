"""Live progress of a long turn in the terminal: calls done out of total, the time since
the calls left, and the calls still running with the worker processes running them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import TextIO

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from toolfleet.orchestrator.connections import decoded
from toolfleet.orchestrator.loop.invocation import CallFinished, CallsDispatched, Update
from toolfleet.shared.keys import Keys, SessionKey
from toolfleet.shared.messages import RunningCall

log = logging.getLogger(__name__)

# A turn shorter than this prints no progress: its results say it all.
QUIET_S = 2.0
# How often a progress line is printed: in place on a terminal, as a new line elsewhere.
TERMINAL_EVERY_S = 0.5
LOG_EVERY_S = 5.0
# Running calls named on one line; the others are counted.
NAMED = 4
# Calls whose records one progress line reads at most (the first still out, in call
# order): a wide turn's line costs one bounded read, not one of all its calls.
LOOKED_AT = 1000


class LiveProgress:
    """Follows a turn's updates (`follow`) and, while `running()` is active, prints its
    progress every `every_s` once it has lasted `quiet_s`."""

    def __init__(
        self,
        out: TextIO,
        client: aioredis.Redis,
        keys: Keys,
        session: SessionKey,
        *,
        every_s: float | None = None,
        quiet_s: float = QUIET_S,
    ) -> None:
        self._out = out
        self._redis = client
        self._keys = keys
        self._session = session
        self._terminal = out.isatty()
        self._every_s = every_s or (TERMINAL_EVERY_S if self._terminal else LOG_EVERY_S)
        self._quiet_s = quiet_s
        self._tools: dict[str, str] = {}  # call id -> tool, of the current turn
        self._done: set[str] = set()
        self._sent_at = 0.0
        self._drawn = False  # a terminal line waits to be cleared

    def follow(self, update: Update) -> None:
        """Take one update of the invocation (call before printing it)."""
        if isinstance(update, CallsDispatched):
            self._tools = {c.call_id: c.tool for c in update.calls}
            self._done = set()
            self._sent_at = time.monotonic()
        elif isinstance(update, CallFinished) and update.result.call_id in self._tools:
            self._done.add(update.result.call_id)
        self.clear()

    def clear(self) -> None:
        """Remove the in-place line before anything else is printed (a terminal only)."""
        if self._drawn:
            self._out.write("\r\x1b[K")
            self._drawn = False

    async def line(self) -> str | None:
        """The progress line now, or None when no turn has been out for `quiet_s`."""
        waiting = [c for c in self._tools if c not in self._done]
        elapsed = time.monotonic() - self._sent_at
        if not waiting or elapsed < self._quiet_s:
            return None
        total = len(self._tools)
        done = total - len(waiting)
        unread = max(0, len(waiting) - LOOKED_AT)
        waiting = waiting[:LOOKED_AT]
        raw = await self._redis.hmget(self._keys.running(self._session), waiting)
        now = time.time()
        running, queued = [], 0
        held: dict[str, int] = {}  # calls a worker took that wait for their tool's limit
        for call_id, value in zip(waiting, raw, strict=True):
            if value is None:
                queued += 1
                continue
            started = RunningCall.model_validate_json(decoded(value))
            if started.waiting_for:
                held[started.waiting_for] = held.get(started.waiting_for, 0) + 1
                continue
            where = f"{started.worker} pid {started.pid}"
            running.append(f"{self._tools[call_id]} on {where} {now - started.started_at:.0f} s")
        text = f"  … {done}/{total} calls done, {elapsed:.0f} s"
        if running:
            more = f" and {len(running) - NAMED} more" if len(running) > NAMED else ""
            text += "; running: " + ", ".join(running[:NAMED]) + more
        if queued:
            text += f"; {queued} waiting for a worker"
        for reason, count in sorted(held.items()):
            text += f"; {count} waiting for {reason}"
        if unread:
            text += f"; {unread} more not looked at"
        return text

    async def _print_every(self) -> None:
        while True:
            await asyncio.sleep(self._every_s)  # a refresh period, not a wait for an event
            try:
                text = await self.line()
            except RedisError as exc:  # progress is a nicety: never a reason to fail the run
                log.debug("no progress line: %s", exc)
                continue
            if text is None:
                continue
            if self._terminal:
                self._out.write("\r\x1b[K" + text)
                self._drawn = True
            else:
                self._out.write(text + "\n")
            self._out.flush()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[LiveProgress]:
        """Print progress in the background while the block runs."""
        task = asyncio.create_task(self._print_every(), name="toolfleet-progress")
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.clear()
