"""The parsed events of recently used sessions, kept by an orchestrator replica so that a
session's next read fetches only the events stored since.

Bounded by sessions and by events in all: a parsed event takes some 4 KB of objects for
200 bytes of JSON, so a bound on sessions alone lets a thousand long conversations take
gigabytes. The least recently used sessions go first; the one just used always stays.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from toolfleet.orchestrator.sessions.events import Event
from toolfleet.shared.keys import SessionKey

# Sessions, and their events in all, kept at most.
MAX_SESSIONS = 1024
MAX_EVENTS = 20_000


@dataclass
class CachedSession:
    """A session's events as stored, and who it belongs to."""

    app_name: str
    user_id: str
    events: list[Event]
    trimmed: int = 0  # events compaction dropped before events[0]
    counted: int = 0  # its events as the cache last counted them (`EventsCache.put`)


class EventsCache:
    """Recently used sessions' events, least recently used dropped first once there are
    more than `max_sessions` sessions or `max_events` events in all.

    Events appended to a session in place are counted at its next `put`: the count runs
    behind by those only."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, max_events: int = MAX_EVENTS) -> None:
        self.max_sessions = max_sessions
        self.max_events = max_events
        self._sessions: OrderedDict[SessionKey, CachedSession] = OrderedDict()
        self._events = 0  # the sum of the sessions' `counted`

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def events(self) -> int:
        """The events kept, as last counted."""
        return self._events

    def get(self, key: SessionKey) -> CachedSession | None:
        """The session's entry, left in the cache (changes to it are kept)."""
        return self._sessions.get(key)

    def take(self, key: SessionKey) -> CachedSession | None:
        """The session's entry, out of the cache until it is `put` back."""
        cached = self._sessions.pop(key, None)
        if cached is not None:
            self._events -= cached.counted
        return cached

    def drop(self, key: SessionKey) -> None:
        """Forget the session: its next read reads it all."""
        self.take(key)

    def put(self, key: SessionKey, cached: CachedSession) -> None:
        """Keep `cached` as the most recently used, then drop the least recently used
        others while over a bound."""
        self.take(key)
        cached.counted = len(cached.events)
        self._sessions[key] = cached
        self._events += cached.counted
        while len(self._sessions) > 1 and (
            len(self._sessions) > self.max_sessions or self._events > self.max_events
        ):
            _, oldest = self._sessions.popitem(last=False)
            self._events -= oldest.counted
