"""The parsed events of recently used sessions, kept by an orchestrator replica so that a
session's next read fetches only the events stored since.

Bounded by sessions and by size in all, where an event and each part of its content count
one: a parsed function response takes 1.7 KB of objects for 80 bytes of JSON, and one
event of a wide turn holds thousands of them, so a bound on sessions or on events alone
lets a thousand sessions take gigabytes. The least recently used sessions go first; the
one just used always stays.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.keys import SessionKey

# Sessions, and the size of their events in all (see `size_of`), kept at most.
MAX_SESSIONS = 1024
MAX_SIZE = 40_000


def size_of(event: Event) -> int:
    """What an event counts against the cache's bound: one, and one per part."""
    content = event.content
    return 1 + (len(content.parts) if content is not None and content.parts else 0)


@dataclass
class CachedSession:
    """A session's events as stored, and who it belongs to. Change `events` through the
    methods, which keep `size` up to date."""

    app_name: str
    user_id: str
    events: list[Event] = field(default_factory=list)
    trimmed: int = 0  # events compaction dropped before events[0]
    # When the session these events are of was created, as stored (None: not read yet): a
    # session of the same id deleted and made again since is another one.
    created: bytes | None = None
    size: int = 0  # of `events`, as `size_of` counts
    counted: int = 0  # its size as the cache last counted it

    def __post_init__(self) -> None:
        self.size = sum(map(size_of, self.events))

    def extend(self, events: Iterable[Event]) -> None:
        """Add `events` after the last."""
        for event in events:
            self.append(event)

    def append(self, event: Event) -> None:
        """Add `event` after the last."""
        self.events.append(event)
        self.size += size_of(event)

    def cut(self, count: int) -> None:
        """Drop the oldest `count` events."""
        self.size -= sum(map(size_of, self.events[:count]))
        del self.events[:count]

    def clear(self) -> None:
        """Drop every event."""
        self.events.clear()
        self.size = 0


class EventsCache:
    """Recently used sessions' events, least recently used dropped first once there are
    more than `max_sessions` sessions or their events' size is over `max_size` in all.

    A session changed in place is counted at its next `put` or `resized`."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, max_size: int = MAX_SIZE) -> None:
        self.max_sessions = max_sessions
        self.max_size = max_size
        self._sessions: OrderedDict[SessionKey, CachedSession] = OrderedDict()
        self._size = 0  # the sum of the sessions' `counted`

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def size(self) -> int:
        """The size of the events kept, as last counted."""
        return self._size

    def get(self, key: SessionKey) -> CachedSession | None:
        """The session's entry, left in the cache (changes to it are kept)."""
        return self._sessions.get(key)

    def take(self, key: SessionKey) -> CachedSession | None:
        """The session's entry, out of the cache until it is `put` back."""
        cached = self._sessions.pop(key, None)
        if cached is not None:
            self._size -= cached.counted
        return cached

    def drop(self, key: SessionKey) -> None:
        """Forget the session: its next read reads it all."""
        self.take(key)

    def put(self, key: SessionKey, cached: CachedSession) -> list[CachedSession]:
        """Keep `cached` as the most recently used, then drop the least recently used
        others while over a bound; those dropped (for the caller to free when it suits:
        a large session's objects take a while)."""
        self.take(key)
        self._sessions[key] = cached
        return self._count(cached)

    def resized(self, key: SessionKey) -> list[CachedSession]:
        """The session's entry changed in place: count it again as the most recently used,
        then drop the least recently used others while over a bound; those dropped."""
        cached = self._sessions.get(key)
        if cached is None:
            return []
        self._sessions.move_to_end(key)
        self._size -= cached.counted
        return self._count(cached)

    def _count(self, cached: CachedSession) -> list[CachedSession]:
        cached.counted = cached.size
        self._size += cached.counted
        dropped = []
        while len(self._sessions) > 1 and (
            len(self._sessions) > self.max_sessions or self._size > self.max_size
        ):
            _, oldest = self._sessions.popitem(last=False)
            self._size -= oldest.counted
            dropped.append(oldest)
        return dropped
