"""The garbage collector's policy for toolfleet's long-running processes (orchestrators,
io workers): what was loaded at start, and then what survives each collection, is frozen,
so that no object is scanned twice; a periodic reclaim collects everything."""

from __future__ import annotations

import gc
import threading
from typing import Any

# Allocations between two collections of the youngest generation (Python's default: 700):
# a turn of 1,000 calls allocates ~10^5 objects on the orchestrator and on an io worker.
GC_YOUNG_THRESHOLD = 10_000
# The same, once each collection's survivors are frozen (SurvivorFreezer): a collection
# then scans only what is new since the last, so fewer, larger ones cost less in all. A
# wide turn keeps its calls' objects until it ends (some 30 tracked objects per call on
# the orchestrator, 25 on an io worker, ~300,000 for 10,000 calls): under this many, its
# collections scan none of them, and they die uncounted when the turn ends (a count of
# net allocations: what is freed is taken off).
SURVIVOR_YOUNG_THRESHOLD = 500_000
# How often everything frozen is collected again (SurvivorFreezer.reclaim).
RECLAIM_EVERY_S = 600.0
# An io worker's reclaim comes sooner, after this many collections froze their survivors:
# a tool's code makes reference cycles (an async tool that raises leaves its frames and
# traceback in one), and those alive at a collection are frozen with the rest.
WORKER_RECLAIM_AFTER = 10


def freeze_startup_heap() -> None:
    """Keep what was loaded at start (modules, agents, tools, schemas) out of every later
    garbage collection, and collect young objects less often. At 1,000 sessions, full
    collections over the startup heap paused the event loop for hundreds of milliseconds
    (bench/RESULTS.md); on an io worker the collector took ~10% of the CPU of
    a 1,000-call turn."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


class SurvivorFreezer:
    """Freeze what survives each collection, so that no object is scanned twice.

    An orchestrator keeps the parsed history of recently run sessions in memory (the
    session store's cache): some 60 objects per one-call turn that live for minutes, and
    no reference cycles among them (none in 2,000 turns). Python's collector scans each
    of them again in every older generation: 8% of the orchestrator's CPU under the
    throughput bench's load, in pauses of up to 130 ms.
    Frozen after their first collection, they are scanned once, and only young objects
    are ever collected (every SURVIVOR_YOUNG_THRESHOLD allocations).

    A cycle that reaches a frozen object is not found by those collections; `reclaim`
    unfreezes and collects everything, every `reclaim_every_s` (a thread of its own), so
    such garbage lives at most that long - and, with `reclaim_after`, once that many
    collections froze their survivors, so that a process whose code makes cycles keeps
    at most that much work's worth of them."""

    def __init__(
        self, reclaim_every_s: float = RECLAIM_EVERY_S, reclaim_after: int | None = None
    ) -> None:
        self.reclaim_every_s = reclaim_every_s
        self.reclaim_after = reclaim_after
        self._reclaiming = False
        self._frozen_since = 0  # collections that froze their survivors since the reclaim
        self._due = threading.Event()  # wakes the reclaim thread: a reclaim is due, or stop
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._threshold = gc.get_threshold()  # what `stop` restores (set by `start`)

    def start(self) -> SurvivorFreezer:
        """Freeze from the next collection on, and reclaim periodically."""
        self._threshold = gc.get_threshold()
        gc.set_threshold(SURVIVOR_YOUNG_THRESHOLD, *self._threshold[1:])
        gc.callbacks.append(self._after_collection)
        self._thread = threading.Thread(
            target=self._reclaim_periodically, name="toolfleet-gc-reclaim", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Back to Python's policy: the callback and the thread go, nothing stays frozen
        (the startup heap neither: call freeze_startup_heap again to freeze it)."""
        self._stopping.set()
        self._due.set()
        if self._thread is not None:
            self._thread.join()
        if self._after_collection in gc.callbacks:
            gc.callbacks.remove(self._after_collection)
        gc.set_threshold(*self._threshold)
        gc.unfreeze()

    def reclaim(self) -> int:
        """Collect everything, frozen objects included; freeze the survivors again. The
        number of unreachable objects found."""
        self._reclaiming = True  # the collections meanwhile must not freeze them back
        try:
            gc.unfreeze()
            found = gc.collect()
        finally:
            self._reclaiming = False
        gc.freeze()
        self._frozen_since = 0
        return found

    def _after_collection(self, phase: str, info: dict[str, Any]) -> None:
        # After the collection is done (its survivors are in the older generations):
        # moving them all to the permanent generation is one list splice.
        if phase == "stop" and not self._reclaiming:
            gc.freeze()
            self._frozen_since += 1
            if self.reclaim_after is not None and self._frozen_since >= self.reclaim_after:
                self._due.set()  # not here: a collection cannot start inside this callback

    def _reclaim_periodically(self) -> None:
        while True:
            self._due.wait(self.reclaim_every_s)
            if self._stopping.is_set():
                return
            self._due.clear()
            self.reclaim()


_freezer: SurvivorFreezer | None = None


def worker_policy() -> SurvivorFreezer:
    """An io worker's policy, as its intake applies it once the tools are loaded: the
    startup heap frozen, and a SurvivorFreezer that reclaims every WORKER_RECLAIM_AFTER
    collections too (started once per process, as `orchestrator_policy`)."""
    return _started(WORKER_RECLAIM_AFTER)


def orchestrator_policy() -> SurvivorFreezer:
    """An orchestrator process's policy, as `toolfleet serve` and `run` apply it once the
    agents are loaded: the startup heap frozen, and this process's SurvivorFreezer
    (started once; a later call finds it running, and its threshold stays)."""
    return _started(None)


def _started(reclaim_after: int | None) -> SurvivorFreezer:
    global _freezer
    if _freezer is None:
        freeze_startup_heap()
        _freezer = SurvivorFreezer(reclaim_after=reclaim_after).start()
    return _freezer
