"""When many calls are awaited, the result reader takes their results in batches.

A result read alone wakes the orchestrator for one session, and that session goes on
alone: its answer's write, the next message's read and the next turn's publish each take
a round trip of their own. At 200 sessions on one worker process (the throughput bench), results
come one at a time, ~3 ms apart, and every call cost ~3.8 writes and one read of its own.
Read together, the sessions go on together and their writes share round trips: pausing
10 ms after each read cut that to ~0.8 writes and ~0.2 reads per call and the
orchestrator's CPU per call by a quarter (bench/RESULTS.md).

Only a read that let a session go on (answered the last call it awaited) starts a
pause: the writes to share are those sessions'. A wide turn's results leave their
session waiting for the rest; pausing after them held back its last results, and the
turn's end, by up to `pause_s` (7-8 ms of a turn of 100 parallel 1 s calls).

The cost is latency, bounded and only under load: a result waits at most `pause_s`
longer, and only while at least `min_awaited` calls are awaited on the replica. A call
then waits for a worker slot among that many others, far longer than the pause. Fewer
calls awaited (one user, or a few sessions' small fan-outs), no result waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from toolfleet.shared.config import Settings


@dataclass(frozen=True)
class ReadBatching:
    """After a read that let sessions go on, wait `pause_s` before the next read while at
    least `min_awaited` calls are still awaited. `pause_s=0` turns it off. `sleep` is
    how to wait (asyncio.sleep; a test passes one it controls)."""

    pause_s: float
    min_awaited: int
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def __post_init__(self) -> None:
        if self.pause_s < 0 or self.min_awaited < 1:
            raise ValueError(
                f"ReadBatching(pause_s={self.pause_s}, min_awaited={self.min_awaited}): "
                "the pause must be >= 0 and the number of calls >= 1"
            )

    @classmethod
    def of(cls, settings: Settings) -> ReadBatching:
        """As TOOLFLEET_RESULT_BATCH_MS and TOOLFLEET_RESULT_BATCH_MIN_CALLS say."""
        return cls(settings.result_batch_ms / 1000, settings.result_batch_min_calls)

    @classmethod
    def off(cls) -> ReadBatching:
        """Every read follows the last at once."""
        return cls(pause_s=0.0, min_awaited=1)

    def due(self, went_on: int, awaited: int) -> bool:
        """Whether to pause after a read that answered the last awaited call of `went_on`
        sessions, with `awaited` calls still awaited."""
        return self.pause_s > 0 and went_on > 0 and awaited >= self.min_awaited

    async def pause(self) -> None:
        """Let more results arrive before the next read."""
        await self.sleep(self.pause_s)
