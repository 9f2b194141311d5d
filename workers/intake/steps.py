"""The intake's step threads, where admitting calls comes before concluding them.

An io worker's coroutine calls run in two steps on these threads: admit (read, count the
delivery, start the coroutine) and conclude (post the result, acknowledge). When a wide
turn's calls arrive faster than the worker admits them, the first of them end while the
last still wait in the queue; concluding those first competes for the same CPU and holds
back every call still waiting - and each waits for its I/O only once started. So
conclusions wait while admissions are queued or running: the results of calls that ended
go out together once the queue is drained, in larger batches. They wait `most_wait_s` at
most from when the first of them began waiting, and none waits again until the
admissions have drained once: under load that never lets up, the results go out as
they used to, no later.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

# How long a conclusion waits at most for the admissions queued and running to end.
CONCLUDE_WAIT_S = 1.0

Step = Callable[[], None]


class Steps:
    """Runs admission and conclusion steps on `threads` threads."""

    def __init__(self, threads: int, most_wait_s: float = CONCLUDE_WAIT_S) -> None:
        self.most_wait_s = most_wait_s
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="toolfleet-step")
        self._admissions = 0  # queued or running
        self._holding_since: float | None = None  # conclusions wait since (monotonic)
        self._changed = threading.Condition()

    def admit(self, step: Step) -> None:
        """Run an admission step; RuntimeError once shut down."""
        with self._changed:
            self._admissions += 1
        try:
            self._pool.submit(self._admitting, step)
        except BaseException:
            self._admitted()
            raise

    def conclude(self, step: Step) -> None:
        """Run a conclusion step once no admission is queued or running, or once
        conclusions have waited `most_wait_s`; on this thread when shut down (a cold
        shutdown)."""
        try:
            self._pool.submit(self._after_admissions, step)
        except RuntimeError:
            step()

    def shutdown(self, *, wait: bool) -> None:
        """Take no more steps; with `wait`, finish those queued first."""
        self._pool.shutdown(wait=wait)

    def _admitting(self, step: Step) -> None:
        try:
            step()
        finally:
            self._admitted()

    def _admitted(self) -> None:
        with self._changed:
            self._admissions -= 1
            if not self._admissions:
                self._holding_since = None
                self._changed.notify_all()

    def _after_admissions(self, step: Step) -> None:
        with self._changed:
            if self._admissions:
                now = time.monotonic()
                if self._holding_since is None:
                    self._holding_since = now
                left = self._holding_since + self.most_wait_s - now
                self._changed.wait_for(lambda: not self._admissions, max(0.0, left))
        step()
