"""Which acknowledgements settle the finished deliveries of one AMQP channel.

A multiple ack of tag T acknowledges every unacknowledged delivery up to T, finished or
not, so it may only cover a run of finished deliveries with nothing running below it:
the lowest run of finished tags goes in one multiple ack, and a finished delivery above
one still running is acknowledged alone (held back, it would keep its place in the
prefetch window for as long as the one below it runs). The tag of a multiple ack must
itself be unacknowledged, or RabbitMQ closes the channel: the run's highest tag not yet
acknowledged alone is the one named.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class AckPlan:
    """The acks to send: `multiple` (with multiple=True; None: none) covering `covered`
    deliveries, then each of `singles` alone."""

    multiple: int | None
    covered: int
    singles: list[int]


class AckWindow:
    """The deliveries of one channel that are not settled yet, in the order delivered
    (a channel's delivery tags increase). One thread's."""

    def __init__(self) -> None:
        self._order: deque[int] = deque()  # delivered, above every tag settled in order
        self._open: set[int] = set()  # delivered, neither acknowledged nor requeued
        self._finished: set[int] = set()  # open, and may be acknowledged
        self._settled: set[int] = set()  # in `_order`, no longer open

    @property
    def unsettled(self) -> int:
        """Deliveries neither acknowledged nor requeued."""
        return len(self._open)

    def delivered(self, tag: int) -> None:
        """Delivery `tag` arrived (higher than every earlier one)."""
        self._order.append(tag)
        self._open.add(tag)

    def finish(self, tag: int) -> bool:
        """Delivery `tag` may be acknowledged; False (ignored) when it is not open: an
        ack of a tag settled already would close the channel."""
        if tag not in self._open:
            return False
        self._finished.add(tag)
        return True

    def forget(self, tag: int) -> bool:
        """Delivery `tag` was settled otherwise (requeued): acknowledge it never; False
        (ignored) when it is not open."""
        if tag not in self._open:
            return False
        self._open.remove(tag)
        self._finished.discard(tag)
        self._settled.add(tag)
        return True

    def plan(self) -> AckPlan:
        """The acks that settle every finished delivery now; they are taken as sent."""
        multiple: int | None = None
        covered = 0
        order, finished, settled = self._order, self._finished, self._settled
        while order and (order[0] in finished or order[0] in settled):
            tag = order.popleft()
            if tag in finished:
                finished.remove(tag)
                self._open.remove(tag)
                multiple = tag
                covered += 1
            else:
                settled.remove(tag)
        singles = sorted(finished)
        finished.clear()
        self._open.difference_update(singles)
        settled.update(singles)
        return AckPlan(multiple, covered, singles)
