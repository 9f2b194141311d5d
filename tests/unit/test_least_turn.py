"""The least turn a figure says a turn's CPU allows: never more than a schedule reaches."""

from __future__ import annotations

from bench.io_defaults import least_turn_ms


def test_half_the_cpu_spread_over_the_cores_follows_the_wait() -> None:
    # 1,000 calls of 400 us on 2 cores: 200 ms before the wait and 200 after, at best
    # 100 ms of each on each core.
    assert least_turn_ms(1000, 400, cores=2) == 1100


def test_a_schedule_reaches_it_when_the_halves_are_even() -> None:
    """Admit every call on both cores (half the CPU), wait, conclude every call on both
    cores: the last call starts at 100 ms, ends at 1,100 ms; conclusions run while the
    later calls still wait, and end with the last one's."""
    cores, wait, before, after = 2, 1000.0, 200.0, 200.0
    last_start = before / cores
    conclusions_end = max(wait + after / cores, last_start + wait)
    assert conclusions_end == least_turn_ms(wait, before + after, cores)


def test_cpu_beyond_twice_the_wait_bounds_the_turn_alone() -> None:
    # More CPU than the turn's two windows hold: all of it spread over the cores.
    assert least_turn_ms(100, 1000, cores=2) == 500
