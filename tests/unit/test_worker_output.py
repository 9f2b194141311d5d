"""LinePump: whole lines of a pipe, in order, to a stream and to the worker's log."""

from __future__ import annotations

import io
import os
from pathlib import Path

from toolfleet.orchestrator.cli import worker_output
from toolfleet.orchestrator.cli.worker_output import LinePump


def test_drain_copies_whole_lines_and_keeps_a_partial_one_until_its_end(tmp_path: Path) -> None:
    read, write = os.pipe()
    shown = io.StringIO()
    log = tmp_path / "worker.log"
    pump = LinePump(read, lambda: shown, log)
    try:
        os.write(write, "first\nsecond é\nthird, not end".encode())
        worker_output.drain()  # all a tool wrote before its result: no waiting on the thread
        assert shown.getvalue() == "first\nsecond é\n"
        os.write(write, b"ed\n")
        worker_output.drain()
        assert shown.getvalue() == "first\nsecond é\nthird, not ended\n"
        os.write(write, b"no newline at exit")
    finally:
        os.close(write)
        pump.stop()
    assert shown.getvalue().endswith("ended\nno newline at exit")
    assert log.read_text() == shown.getvalue()


def test_a_line_without_end_is_not_held_past_max_line(tmp_path: Path) -> None:
    read, write = os.pipe()
    shown = io.StringIO()
    pump = LinePump(read, lambda: shown, tmp_path / "worker.log")
    try:
        for _ in range(worker_output.MAX_LINE // 4096 + 1):
            os.write(write, b"x" * 4096)
            worker_output.drain()
        assert len(shown.getvalue()) > worker_output.MAX_LINE
    finally:
        os.close(write)
        pump.stop()
