"""search_memory: a plain word match over the text of a user's sessions.

Like ADK's in-memory memory service, a past event matches when it contains any word
of the query (case-insensitive); no embeddings, no ranking beyond recency.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

from toolfleet.shared.keys import Keys, session_key

if TYPE_CHECKING:
    from google.genai import types

_WORD = re.compile(r"[\w']+")


@dataclass(frozen=True)
class MemoryEntry:
    """One past event with text, as found by search_memory."""

    session_id: str
    author: str
    timestamp: float
    content: types.Content

    @property
    def text(self) -> str:
        """The event's text parts, joined; what the query's words are matched against."""
        return "".join(p.text or "" for p in self.content.parts or ())


@dataclass(frozen=True)
class SearchMemoryResponse:
    """What `ToolContext.search_memory` returns: the matching events, newest first."""

    memories: list[MemoryEntry] = field(default_factory=list)


class MemoryStore:
    """Word-match search over the stored events of a user's sessions (search_memory).

    A user's memory is the sessions added to it (`add`, ADK's add_session_to_memory);
    until the first is added, every stored session of theirs. Each search reads every
    event of those sessions: fine for demos and small histories, slow for large ones. It
    returns at most `limit` entries.
    """

    def __init__(self, client: redis.Redis, keys: Keys, limit: int = 20) -> None:
        self._redis = client
        self._keys = keys
        self._limit = limit

    def add(self, app: str, user: str, session_id: str) -> None:
        """Add the session to the user's memory: searches read its events from now on."""
        self._redis.sadd(self._keys.memory_sessions(app, user), session_id)

    def search(self, app: str, user: str, query: str) -> SearchMemoryResponse:
        """Events of the user's remembered sessions that share a word with `query`, newest
        first."""
        words = {w.lower() for w in _WORD.findall(query)}
        found: list[MemoryEntry] = []
        remembered = self._redis.smembers(self._keys.memory_sessions(app, user))
        for raw_id in remembered or self._redis.smembers(self._keys.user_sessions(app, user)):
            session_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
            events = self._keys.events(session_key(app, user, session_id))
            for raw in self._redis.lrange(events, 0, -1):
                entry = _entry(session_id, json.loads(raw))
                if entry and words & {w.lower() for w in _WORD.findall(entry.text)}:
                    found.append(entry)
        found.sort(key=lambda e: e.timestamp, reverse=True)
        return SearchMemoryResponse(found[: self._limit])


def _entry(session_id: str, event: dict[str, Any]) -> MemoryEntry | None:
    content = event.get("content")
    if not isinstance(content, dict):
        return None
    # Imported here: google-genai takes half a second to load, and a worker whose tools
    # search no memory does without it.
    from google.genai import types

    parsed = types.Content.model_validate(content)
    if not any(p.text for p in parsed.parts or ()):
        return None
    return MemoryEntry(
        session_id, str(event.get("author", "")), float(event.get("timestamp", 0.0)), parsed
    )
