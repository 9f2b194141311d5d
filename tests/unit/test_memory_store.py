"""A user's memory, as ADK's: the sessions added to it; until the first is added, every
stored session of theirs."""

from __future__ import annotations

import json

import fakeredis

from toolfleet.shared.keys import Keys, session_key
from toolfleet.shared.memory import MemoryStore


def said(client: fakeredis.FakeRedis, keys: Keys, session_id: str, text: str, at: float) -> None:
    """A user's message stored in a session of app `a` and user `u`, as the store keeps it."""
    client.sadd(keys.user_sessions("a", "u"), session_id)
    event = {
        "id": f"e-{at}", "invocation_id": "i", "author": "user", "timestamp": at,
        "content": {"role": "user", "parts": [{"text": text}]},
    }  # fmt: skip
    client.rpush(keys.events(session_key("a", "u", session_id)), json.dumps(event))


def texts(store: MemoryStore, query: str) -> list[str]:
    return [m.text for m in store.search("a", "u", query).memories]


def test_memory_is_every_session_until_one_is_added_then_only_the_added_ones() -> None:
    client, keys = fakeredis.FakeRedis(), Keys("t")
    store = MemoryStore(client, keys)
    said(client, keys, "past", "the revenue grew in Q3", 1.0)
    said(client, keys, "now", "analyze revenue please", 2.0)
    assert texts(store, "revenue") == ["analyze revenue please", "the revenue grew in Q3"]

    store.add("a", "u", "past")
    assert texts(store, "revenue") == ["the revenue grew in Q3"]
    said(client, keys, "past", "revenue target met", 3.0)  # later events of an added session
    assert texts(store, "revenue") == ["revenue target met", "the revenue grew in Q3"]
    assert MemoryStore(client, keys).search("a", "other-user", "revenue").memories == []
