"""The replica's cache of parsed session events: bounded by sessions and by size in all
(an event and each part of its content count one), least recently used first, the
session just used always kept."""

from __future__ import annotations

from google.genai import types

from toolfleet.orchestrator.sessions.events import Event
from toolfleet.orchestrator.sessions.events_cache import CachedSession, EventsCache, size_of
from toolfleet.shared.keys import SessionKey, session_key


def key(n: int) -> SessionKey:
    return session_key("app", "u", f"s{n}")


def bare(count: int) -> list[Event]:
    return [Event(invocation_id="i", author="a") for _ in range(count)]


def session(events: int) -> CachedSession:
    return CachedSession("app", "u", bare(events))


def wide_event(parts: int) -> Event:
    """One event of a wide turn: `parts` function responses."""
    responses = [
        types.Part.from_function_response(name="t", response={"n": n}) for n in range(parts)
    ]
    return Event(invocation_id="i", author="a", content=types.Content(role="user", parts=responses))


def test_an_event_counts_one_and_one_per_part() -> None:
    assert size_of(bare(1)[0]) == 1
    assert size_of(wide_event(1000)) == 1001
    empty = Event(invocation_id="i", author="a", content=types.Content(role="model"))
    assert size_of(empty) == 1


def test_a_cached_session_keeps_its_size_as_it_changes() -> None:
    cached = CachedSession("app", "u", [wide_event(3)])
    assert cached.size == 4
    cached.append(wide_event(10))
    cached.extend(bare(2))
    assert cached.size == 4 + 11 + 2
    cached.cut(1)
    assert (cached.size, len(cached.events)) == (13, 3)
    cached.clear()
    assert (cached.size, cached.events) == (0, [])


def test_the_least_recently_used_sessions_go_first_past_the_session_bound() -> None:
    cache = EventsCache(max_sessions=2, max_size=1000)
    cache.put(key(1), session(1))
    cache.put(key(2), session(1))
    cache.put(key(1), cache.get(key(1)) or session(0))  # used again: s2 is now the oldest
    cache.put(key(3), session(1))
    assert cache.get(key(1)) is not None and cache.get(key(3)) is not None
    assert cache.get(key(2)) is None
    assert (len(cache), cache.size) == (2, 2)


def test_long_sessions_are_dropped_past_the_size_bound_but_the_newest_stays() -> None:
    cache = EventsCache(max_sessions=100, max_size=10)
    for n in range(5):
        cache.put(key(n), session(3))
    assert [n for n in range(5) if cache.get(key(n))] == [2, 3, 4]
    assert cache.size == 9
    cache.put(key(9), session(25))  # over the bound alone: kept, every other one dropped
    assert len(cache) == 1 and cache.get(key(9)) is not None
    assert cache.size == 25


def test_one_wide_event_weighs_as_much_as_its_parts() -> None:
    cache = EventsCache(max_sessions=100, max_size=2000)
    for n in range(10):
        cache.put(key(n), session(2))
    cache.put(key(10), CachedSession("app", "u", [wide_event(1990)]))  # 1991 + 20 > 2000
    assert [n for n in range(11) if cache.get(key(n))] == [6, 7, 8, 9, 10]
    assert cache.size == 1991 + 8


def test_a_session_changed_in_place_is_counted_when_resized_and_kept_as_newest() -> None:
    cache = EventsCache(max_sessions=100, max_size=10)
    cache.put(key(1), session(2))
    cache.put(key(2), session(2))
    cached = cache.get(key(1))
    assert cached is not None
    cached.extend(bare(5))  # an append stored through the cache
    assert cache.size == 4  # behind until counted again
    cache.resized(key(1))
    assert cache.size == 9 and cache.get(key(2)) is not None
    cached.append(wide_event(2))  # 12 > 10: the least recently used other (s2) goes
    cache.resized(key(1))
    assert cache.get(key(2)) is None and cache.get(key(1)) is cached
    assert cache.size == 10
    cache.resized(key(7))  # not cached: nothing happens
    assert cache.size == 10


def test_a_taken_session_is_out_until_put_back() -> None:
    cache = EventsCache(max_sessions=100, max_size=100)
    cache.put(key(1), session(4))
    taken = cache.take(key(1))
    assert taken is not None and cache.get(key(1)) is None
    assert (len(cache), cache.size) == (0, 0)
    assert cache.take(key(1)) is None
    cache.drop(key(1))  # nothing there: nothing happens
    cache.resized(key(1))
    assert cache.size == 0
    cache.put(key(1), taken)
    assert cache.size == 4
