"""A wide turn's bookkeeping is freed from the event loop's next round on, a slice a
round, not in its path."""

from __future__ import annotations

import asyncio
import gc
import weakref

from toolfleet.orchestrator.release import SLICE_ITEMS, release_soon
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


async def test_a_large_release_is_freed_a_slice_a_round_letting_others_run_between() -> None:
    """Freed whole, 10,000 envelopes would hold the loop until the last: a reply that
    came meanwhile would wait for all of them. A slice a round, what was scheduled in
    between runs after the first slice, and everything is freed in the end."""
    gc.disable()
    try:
        items = [Bulky() for _ in range(10 * SLICE_ITEMS)]
        first, last = weakref.ref(items[0]), weakref.ref(items[-1])
        by_key = {n: Bulky() for n in range(3 * SLICE_ITEMS)}
        kept = weakref.ref(by_key[0])
        release_soon(items, by_key, Bulky())
        del items, by_key
        loop = asyncio.get_running_loop()
        between: asyncio.Future[tuple[bool, bool]] = loop.create_future()
        # Scheduled after the release's first slice: it runs in the round after it.
        loop.call_soon(lambda: between.set_result((last() is None, first() is None)))
        assert await asyncio.wait_for(between, 5) == (False, False)  # a slice in, not all
        await until_freed([first, last, kept])
    finally:
        gc.enable()


async def until_freed(refs: list[weakref.ref[Bulky]]) -> None:
    """Wait a round of the loop at a time until every object of `refs` is freed
    (bounded)."""
    loop = asyncio.get_running_loop()
    for _ in range(1000):
        if all(ref() is None for ref in refs):
            return
        next_round: asyncio.Future[None] = loop.create_future()
        loop.call_soon(next_round.set_result, None)
        await asyncio.wait_for(next_round, 5)
    raise AssertionError("not freed after 1,000 rounds of the loop")


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
