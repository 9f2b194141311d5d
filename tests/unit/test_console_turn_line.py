"""`toolfleet run`'s line under a turn: right plurals, and no parallel factor without tool
time to speak of."""

from __future__ import annotations

from toolfleet.orchestrator.cli.console import plural, turn_line


def test_one_of_each_is_singular_and_a_turn_without_tool_time_has_no_factor() -> None:
    line = turn_line(1, 1, 0.004, 0.0002)
    assert line == "turn: 1 call on 1 worker process, wall 4 ms vs 0 ms of tool time"


def test_a_fan_out_says_its_parallel_factor() -> None:
    line = turn_line(8, 3, 1.0, 2.5)
    assert line == (
        "turn: 8 calls on 3 worker processes, wall 1000 ms vs 2500 ms of tool time (x2.5 parallel)"
    )


def test_plural_counts_with_separators() -> None:
    assert [plural(0, "call"), plural(1, "call"), plural(1200, "call")] == [
        "0 calls",
        "1 call",
        "1,200 calls",
    ]
    assert plural(2, "process", "processes") == "2 processes"
