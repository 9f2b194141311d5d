"""What the tools of local workers print, shown in this process's own output as they print it.

A local worker's tools print into two pipes to this process (workers/tool_output.py; Celery's
own lines go to the worker's log file): a thread per pipe copies each line to this process's
stdout or stderr, and to the worker's log. `drain` copies what the pipes hold right now; a printer
calls it before it shows an update, so that a line a tool printed before its result was
posted comes before the agent's answer that follows the call.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

# Reads per `pump` at most: a tool that prints without pause cannot hold a drain forever.
MAX_READS = 64
READ_BYTES = 65536
MAX_LINE = 1 << 20  # a longer run without a newline is shown as it is, not held in memory
POLL_S = 0.1  # how soon a stopping pump's thread notices

_live: weakref.WeakSet[LinePump] = weakref.WeakSet()


def drain() -> None:
    """Copy every live pump's complete lines that have reached its pipe so far."""
    for pump in list(_live):
        pump.pump()


class LinePump:
    """Copies the lines of one worker pipe to `target()` and appends them to `log_path`."""

    def __init__(self, fd: int, target: Callable[[], TextIO], log_path: Path) -> None:
        self._fd = fd  # the read end, ours to close
        os.set_blocking(self._fd, False)  # a drain and the thread may both read: never block
        self._target = target
        self._log = log_path.open("ab")
        self._lock = threading.Lock()
        self._partial = b""
        self._ended = False
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="toolfleet-worker-output", daemon=True
        )
        self._thread.start()
        _live.add(self)

    def _run(self) -> None:
        while not self._stopping.is_set() and not self._ended:
            readable, _, _ = select.select([self._fd], [], [], POLL_S)
            if readable:
                self.pump()

    def pump(self) -> None:
        """Copy the complete lines the pipe holds now; at its end, the rest too."""
        with self._lock:
            if self._ended:
                return
            for _ in range(MAX_READS):
                try:
                    chunk = os.read(self._fd, READ_BYTES)
                except BlockingIOError:
                    break
                if not chunk:  # the worker and its children have all exited
                    self._ended = True
                    self._write(self._partial)
                    self._partial = b""
                    break
                lines, newline, self._partial = (self._partial + chunk).rpartition(b"\n")
                self._write(lines + newline)
                if len(self._partial) > MAX_LINE:
                    self._write(self._partial)
                    self._partial = b""

    def _write(self, data: bytes) -> None:
        if not data:
            return
        self._log.write(data)
        self._log.flush()
        # Split on newlines only: no UTF-8 character is cut.
        with contextlib.suppress(OSError, ValueError):  # our own stream closed: the log has it
            out = self._target()
            out.write(data.decode(errors="replace"))
            out.flush()

    def stop(self, timeout_s: float = 1.0) -> None:
        """Stop the thread, copy what is left, close the pipe and the log."""
        self._stopping.set()
        self._thread.join(timeout_s)
        self.pump()
        with self._lock:
            self._ended = True
            os.close(self._fd)
            self._log.close()
        _live.discard(self)


def stdout() -> TextIO:
    """This process's stdout as it is now (a test's capture replaces it)."""
    return sys.stdout


def stderr() -> TextIO:
    """This process's stderr as it is now."""
    return sys.stderr
