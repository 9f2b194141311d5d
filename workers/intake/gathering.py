"""Items that arrive one at a time, from any thread, handled in batches on intake threads."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

Item = TypeVar("Item")


class Gatherer(Generic[Item]):
    """Hands the items `add`ed to `handle` in batches of up to `most`, on threads that
    `submit` runs it on. Items that arrive while a batch waits for its thread join that
    batch: a wide turn's calls ending together make a few batches, one call alone a batch
    of one. One batch waits at a time; any number may be handled at once."""

    def __init__(
        self,
        submit: Callable[[Callable[[], None]], None],
        handle: Callable[[list[Item]], None],
        most: int,
    ) -> None:
        self._submit = submit
        self._handle = handle
        self._most = most
        self._lock = threading.Lock()
        self._items: list[Item] = []
        self._waiting = False  # a batch is submitted and has not taken its items yet

    def add(self, item: Item) -> None:
        """Add `item` to the batch that waits for a thread (submitting one if none waits)."""
        with self._lock:
            self._items.append(item)
            if self._waiting:
                return
            self._waiting = True
        self._submit(self._take_batch)

    def _take_batch(self) -> None:
        with self._lock:
            batch = self._items[: self._most]
            del self._items[: self._most]
            more = self._waiting = bool(self._items)
        if more:  # past `most`: the rest wait for a thread of their own
            self._submit(self._take_batch)
        try:
            self._handle(batch)
        except Exception:
            log.exception("handling a batch of %d failed", len(batch))
