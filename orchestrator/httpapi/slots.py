"""How many event streams are open, per caller and in all, and the caps on them."""

from __future__ import annotations

from collections.abc import Callable

from toolfleet.orchestrator.httpapi.callers import Caller
from toolfleet.orchestrator.httpapi.errors import ApiError

RETRY_AFTER = {"Retry-After": "5"}


class StreamSlots:
    """Counts open event streams: a caller past its share gets 429, anyone past the
    replica's cap 503. An admin (often a backend serving many users with one token) has no
    share of its own, only the replica's cap."""

    def __init__(self, max_total: int, max_per_caller: int) -> None:
        self.max_total = max_total
        self.max_per_caller = max_per_caller
        self._open: dict[str, int] = {}

    def take(self, caller: Caller) -> Callable[[], None]:
        """Take a slot for `caller`, or raise ApiError 429/503; answer the function that gives
        it back (calling it again does nothing)."""
        mine = self._open.get(caller.subject, 0)
        if mine >= self.max_per_caller and not caller.admin:
            raise ApiError(
                429,
                f"{mine} event streams of {caller.subject!r} are open, the most one caller may "
                "hold (TOOLFLEET_HTTP_MAX_STREAMS_PER_CALLER): close one first",
                headers=RETRY_AFTER,
            )
        if self.open() >= self.max_total:
            raise ApiError(
                503,
                f"this replica holds {self.max_total} event streams, its limit "
                "(TOOLFLEET_HTTP_MAX_STREAMS): try again later or poll the session",
                headers=RETRY_AFTER,
            )
        self._open[caller.subject] = mine + 1
        given_back = False

        def give_back() -> None:
            nonlocal given_back
            if given_back:
                return
            given_back = True
            left = self._open[caller.subject] - 1
            if left:
                self._open[caller.subject] = left
            else:
                del self._open[caller.subject]  # no entry per caller that ever streamed

        return give_back

    def open(self) -> int:
        """How many event streams are open now."""
        return sum(self._open.values())

    def callers(self) -> int:
        """How many callers hold a stream now."""
        return len(self._open)
