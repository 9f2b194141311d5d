"""Where an intake takes its messages from and acknowledges them: the broker's side of
the intake, one implementation per broker (Redis lists, RabbitMQ queues)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from toolfleet.shared.celery_wire.parse import TaskMessage


@dataclass(frozen=True)
class Dropped:
    """A message taken that will not run: why (as the log says it), its start, and the
    tag that acknowledges it (None: the broker never recorded it as taken)."""

    reason: str
    raw: bytes
    tag: str | None


@dataclass(frozen=True)
class Taken:
    """What one take got: messages to run, and messages that cannot run."""

    messages: list[TaskMessage] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.messages or self.dropped)


class Taker(Protocol):
    """Takes messages for one intake thread. Neither method raises on a broker error:
    each logs it and returns (a take with nothing)."""

    name: str

    def take(self, limit: int) -> Taken:
        """Up to `limit` messages, each unacknowledged until `Source.ack`."""
        ...

    def wait(self, timeout_s: float) -> None:
        """Block until there may be messages to take, or `timeout_s` passes."""
        ...


class Source(Protocol):
    """A broker's queues, taken by one intake thread per taker."""

    @property
    def takers(self) -> list[Taker]:
        """A thread's worth of taking each."""
        ...

    def start(self) -> None:
        """Connect (from threads of its own, where it has any)."""
        ...

    def ack(self, tag: str) -> None:
        """Acknowledge the message `tag` (from any thread, within a few milliseconds)."""
        ...

    def requeue(self, tag: str) -> None:
        """Put the message `tag`, taken and never run, back on its queue."""
        ...

    def keep(self, tags: Sequence[str]) -> None:
        """The messages `tags`, taken and held for their ETA, are still this worker's:
        the broker must not deliver them again when its visibility timeout passes."""
        ...

    def holds(self, tag: str) -> bool:
        """Whether the message `tag` is still this worker's: False once the broker took
        it back (its connection dropped) to deliver it again."""
        ...

    def stop_taking(self) -> None:
        """Stop taking; messages received and not taken yet go back to their queue."""
        ...

    def stop(self) -> None:
        """Send the acks made so far and close; what is unacknowledged is delivered again
        (elsewhere)."""
        ...
