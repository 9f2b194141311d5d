"""Freeing a wide turn's bookkeeping off its path.

A turn of thousands of calls leaves tens of thousands of objects behind (its envelopes,
futures, parts), freed the moment their last reference goes: in CPython that is work
done there and then, on the orchestrator's one thread, between the turn's last result
and its answer. Handed to `release_soon`, they are freed from the event loop's next
round on, a slice a round: a write's reply that comes meanwhile is read between two
slices, not after all of them (a 10,000-call turn's took the loop ~17 ms at once).
"""

from __future__ import annotations

import asyncio

# Items freed in one round of the loop at most (a slice takes well under a millisecond).
SLICE_ITEMS = 256


def release_soon(*objects: object) -> None:
    """Let `objects` go from the running loop's next round on, a slice a round. A list,
    dict or set among them is emptied a slice at a time: pass only what nothing else
    uses (empty containers need no keeping)."""
    if not any(objects):
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # closed outside a loop (at exit): freed now
        return
    loop.call_soon(_let_go, loop, list(objects))


def _let_go(loop: asyncio.AbstractEventLoop, objects: list[object]) -> None:
    """Free a slice of `objects` (the last first); the rest in the loop's next round."""
    budget = SLICE_ITEMS
    while objects and budget > 0:
        last = objects[-1]
        size = len(last) if isinstance(last, list | dict | set) else 0
        if size > budget:
            _shrink(last, budget)
            break
        objects.pop()  # dropped whole: a container no larger than what is left
        budget -= max(size, 1)
    if objects:
        loop.call_soon(_let_go, loop, objects)


def _shrink(container: object, count: int) -> None:
    """Drop `count` items of a list, dict or set."""
    if isinstance(container, list):
        del container[-count:]
    elif isinstance(container, dict):
        for _ in range(count):
            container.popitem()
    elif isinstance(container, set):
        for _ in range(count):
            container.pop()
