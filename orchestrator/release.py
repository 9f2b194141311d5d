"""Freeing a wide turn's bookkeeping off its path.

A turn of thousands of calls leaves tens of thousands of objects behind (its envelopes,
futures, parts), freed the moment their last reference goes: in CPython that is work
done there and then, on the orchestrator's one thread, between the turn's last result
and its answer. Handed to `release_soon`, they are freed at the event loop's next round
instead: while the turn waits on its next write.
"""

from __future__ import annotations

import asyncio


def release_soon(*objects: object) -> None:
    """Keep `objects` until the running loop's next round, then let them go (empty
    containers need no keeping)."""
    if not any(objects):
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # closed outside a loop (at exit): freed now
        return
    loop.call_soon(_let_go, objects)


def _let_go(objects: tuple[object, ...]) -> None:
    """Nothing to do: the loop drops its handle, and with it `objects`."""
