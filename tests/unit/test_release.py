"""A wide turn's bookkeeping is freed at the event loop's next round, not in its path."""

from __future__ import annotations

import asyncio
import gc
import weakref

from toolfleet.orchestrator.release import release_soon
from toolfleet.orchestrator.sessions.events_cache import CachedSession, EventsCache
from toolfleet.shared.keys import session_key


class Bulky:
    """Stands for a large structure; a weak reference tells when it is freed."""


async def test_objects_are_freed_at_the_next_round_of_the_loop() -> None:
    gc.disable()  # freed by reference counting alone, as CPython frees them
    try:
        bulky = Bulky()
        gone = weakref.ref(bulky)
        release_soon(bulky)
        del bulky
        assert gone() is not None  # kept through the rest of this step
        loop = asyncio.get_running_loop()
        next_round: asyncio.Future[None] = loop.create_future()
        loop.call_soon(next_round.set_result, None)  # runs after the release, in order
        await asyncio.wait_for(next_round, 5)
        assert gone() is None
    finally:
        gc.enable()


def test_outside_a_loop_objects_are_freed_at_once() -> None:
    bulky = Bulky()
    gone = weakref.ref(bulky)
    release_soon(bulky)
    del bulky
    assert gone() is None


def test_the_cache_hands_back_the_sessions_it_drops() -> None:
    cache = EventsCache(max_sessions=2)
    keys = [session_key("app", "u", f"s{i}") for i in range(3)]
    entries = [CachedSession("app", "u") for _ in keys]
    assert cache.put(keys[0], entries[0]) == []
    assert cache.put(keys[1], entries[1]) == []
    assert cache.put(keys[2], entries[2]) == [entries[0]]  # the least recently used
    assert cache.resized(keys[1]) == []
    assert cache.resized(keys[0]) == []  # not cached (dropped): nothing to count
