"""The replica's cache of parsed session events: bounded by sessions and by events in
all, least recently used first, the session just used always kept."""

from __future__ import annotations

from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.events_cache import CachedSession, EventsCache
from toolfleet.shared.keys import SessionKey, session_key


def key(n: int) -> SessionKey:
    return session_key("app", "u", f"s{n}")


def session(events: int) -> CachedSession:
    return CachedSession("app", "u", [Event(invocation_id="i", author="a") for _ in range(events)])


def test_the_least_recently_used_sessions_go_first_past_the_session_bound() -> None:
    cache = EventsCache(max_sessions=2, max_events=1000)
    cache.put(key(1), session(1))
    cache.put(key(2), session(1))
    cache.put(key(1), cache.get(key(1)) or session(0))  # used again: s2 is now the oldest
    cache.put(key(3), session(1))
    assert cache.get(key(1)) is not None and cache.get(key(3)) is not None
    assert cache.get(key(2)) is None
    assert (len(cache), cache.events) == (2, 2)


def test_long_sessions_are_dropped_past_the_event_bound_but_the_newest_stays() -> None:
    cache = EventsCache(max_sessions=100, max_events=10)
    for n in range(5):
        cache.put(key(n), session(3))
    assert [n for n in range(5) if cache.get(key(n))] == [2, 3, 4]
    assert cache.events == 9
    cache.put(key(9), session(25))  # over the bound alone: kept, every other one dropped
    assert len(cache) == 1 and cache.get(key(9)) is not None
    assert cache.events == 25


def test_events_appended_in_place_are_counted_at_the_next_put() -> None:
    cache = EventsCache(max_sessions=100, max_events=10)
    cache.put(key(1), session(2))
    cache.put(key(2), session(2))
    cached = cache.get(key(1))
    assert cached is not None
    cached.events.extend(session(5).events)  # an append stored through the cache
    assert cache.events == 4  # behind until the session is put back
    cache.put(key(1), cached)
    assert cache.events == 9
    cache.put(key(3), session(2))  # 11 > 10: the least recently used (s2) goes
    assert cache.get(key(2)) is None and cache.events == 9


def test_a_taken_session_is_out_until_put_back() -> None:
    cache = EventsCache(max_sessions=100, max_events=100)
    cache.put(key(1), session(4))
    taken = cache.take(key(1))
    assert taken is not None and cache.get(key(1)) is None
    assert (len(cache), cache.events) == (0, 0)
    assert cache.take(key(1)) is None
    cache.drop(key(1))  # nothing there: nothing happens
    cache.put(key(1), taken)
    assert cache.events == 4
