"""The work the benchmark tools do, as plain functions with no toolfleet import.

Shared by the toolfleet tools (bench.tools), the raw Celery reference (bench.raw_celery)
and the ADK side (bench.adk_turn, which runs in an interpreter that has google-adk).
"""

from __future__ import annotations

import asyncio
import time


def noop() -> dict[str, bool]:
    """Does nothing and answers at once."""
    return {"ok": True}


def sleep_ms(ms: int) -> dict[str, int]:
    """Blocks its thread for `ms` milliseconds (a slow API or database call)."""
    time.sleep(ms / 1000)
    return {"slept_ms": ms}


async def async_sleep_ms(ms: int) -> dict[str, int]:
    """Waits `ms` milliseconds without blocking (an async HTTP call)."""
    await asyncio.sleep(ms / 1000)
    return {"slept_ms": ms}


def cpu_work(iterations: int) -> dict[str, int]:
    """Pure-Python CPU work that holds the GIL: `iterations` rounds of integer arithmetic."""
    acc = 0
    for i in range(iterations):
        acc = (acc * 31 + i) % 1_000_003
    return {"checksum": acc}


def calibrate_cpu_work(target_s: float, probe: int = 200_000) -> int:
    """Iterations of cpu_work that take about `target_s` seconds on one idle core here."""
    best = float("inf")
    for _ in range(3):  # the fastest probe is the least disturbed by other processes
        started = time.perf_counter()
        cpu_work(probe)
        best = min(best, time.perf_counter() - started)
    return max(1, int(probe * target_s / best))
