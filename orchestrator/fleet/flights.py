"""The calls of a turn that are out on the fleet, and the order they come back in.

A turn of a thousand calls gets its results in bursts: waiting with `asyncio.wait` on
every call still out, once per burst, hooked and unhooked a callback on each of them
each time (k² work: 0.1 s of a 1,000-call turn's CPU). Each call's future is hooked once
here, and reports itself done on a list that one waiter watches; deadlines wait in a heap.
(An asyncio.Queue did the same, but building one is 2.5% of a one-call turn's CPU.)
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from toolfleet.orchestrator.fleet.prepared import PreparedCall
from toolfleet.orchestrator.fleet.watch import CallWatch
from toolfleet.shared.messages import ToolResult

Result = asyncio.Future[ToolResult]


@dataclass
class Flight:
    """A sent call: when it left and when the orchestrator stops waiting for it."""

    prepared: PreparedCall
    sent_at: float
    deadline: float
    extended: bool = False  # once, by the recovery bound, after a Redis outage
    watch: CallWatch | None = None  # None: sent before a takeover, not by this replica


class InFlight:
    """Calls out on the fleet, by their result's future."""

    def __init__(self) -> None:
        self._flights: dict[Result, Flight] = {}
        self._done: list[Result] = []
        self._waiter: asyncio.Future[None] | None = None  # while `finished` waits
        self._deadlines: list[tuple[float, int, Result]] = []
        self._order = itertools.count()  # ties in the heap never compare futures

    def __len__(self) -> int:
        return len(self._flights)

    def __iter__(self) -> Iterator[Flight]:
        return iter(list(self._flights.values()))

    def add(self, future: Result, flight: Flight) -> None:
        """Count `flight` out until `future` has its result or its deadline passes."""
        self._flights[future] = flight
        self._push_deadline(future, flight)
        future.add_done_callback(self._came)

    def _came(self, future: Result) -> None:
        self._done.append(future)
        _wake(self._waiter)

    async def finished(self, timeout_s: float) -> list[tuple[Flight, ToolResult]]:
        """The calls whose results came, at least one unless `timeout_s` passes first."""
        if not self._done:
            loop = asyncio.get_running_loop()
            self._waiter = waiter = loop.create_future()
            timer = loop.call_later(timeout_s, _wake, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        came, self._done = self._done, []
        ended = []
        for future in came:
            flight = self._flights.pop(future, None)
            if flight is not None:  # not already answered by its deadline
                ended.append((flight, future.result()))
        return ended

    def next_deadline(self) -> float:
        """The earliest deadline of a call still out (there must be one)."""
        while self._deadlines[0][2] not in self._flights:
            heapq.heappop(self._deadlines)  # answered: its entry stays until it surfaces
        return self._deadlines[0][0]

    def expired(self, now: float, extends: Callable[[Flight], bool]) -> list[Flight]:
        """The calls past their deadlines, no longer out; those `extends` gives more time
        (it moves their deadline) stay."""
        gone = []
        while self._deadlines and self._deadlines[0][0] <= now:
            _, _, future = heapq.heappop(self._deadlines)
            flight = self._flights.get(future)
            if flight is None or flight.deadline > now:
                continue  # answered, or an entry older than its moved deadline
            if extends(flight):
                self._push_deadline(future, flight)
                continue
            del self._flights[future]
            gone.append(flight)
        return gone

    def _push_deadline(self, future: Result, flight: Flight) -> None:
        heapq.heappush(self._deadlines, (flight.deadline, next(self._order), future))


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
