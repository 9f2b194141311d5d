"""The garbage collector's policy for toolfleet's long-running processes (orchestrators,
io workers)."""

from __future__ import annotations

import gc

# Allocations between two collections of the youngest generation (Python's default: 700):
# a turn of 1,000 calls allocates ~10^5 objects on the orchestrator and on an io worker.
GC_YOUNG_THRESHOLD = 10_000


def freeze_startup_heap() -> None:
    """Keep what was loaded at start (modules, agents, tools, schemas) out of every later
    garbage collection, and collect young objects less often. At 1,000 sessions, full
    collections over the startup heap paused the event loop for hundreds of milliseconds
    (bench/RESULTS.md, figure 4); on an io worker the collector took ~10% of the CPU of
    a 1,000-call turn."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
