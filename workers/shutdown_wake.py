"""Wake the worker's event loop when a shutdown is asked for, so that it starts at once.

Celery's SIGTERM (and SIGINT, SIGQUIT) handler only sets a flag that the consumer's loop
reads between two turns of kombu's hub, and a hub with no timer due polls for up to a
second: the signal interrupts the poll, Python resumes it with what is left of the
timeout, and the worker goes on waiting for a message it will not take. Every stop of
an idle worker (the end of `toolfleet run`, a rolling restart) lost that second.

This consumer step registers the read end of a pipe with the hub, and writes to it when
Celery announces the shutdown (`worker_shutting_down`, sent from that same handler): the
resumed poll returns at once, and the loop's next turn reads the flag.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from celery import Celery, bootsteps
from celery.signals import worker_shutting_down


class ShutdownWake:
    """A pipe whose read end a hub watches; `wake` makes it readable."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)  # written in a signal handler: never block

    @property
    def fd(self) -> int:
        """The read end, for the hub to watch."""
        return self._read

    def wake(self) -> None:
        """Make the read end readable (a full pipe is readable already)."""
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._write, b"\0")

    def drain(self) -> None:
        """Read what the wakes wrote, so the hub does not report the pipe again."""
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._read, 512):
                pass


def install_shutdown_wake(app: Celery) -> None:
    """Add the consumer step that wakes `app`'s worker's hub on a shutdown request."""
    wake = ShutdownWake()  # as long as the process: its worker may restart its consumer

    class WakeOnShutdown(bootsteps.StartStopStep):
        label = "toolfleet shutdown wake"

        def register_with_event_loop(self, parent: Any, hub: Any) -> None:
            # Again after a reconnection: the consumer resets the hub's readers.
            hub.add_reader(wake.fd, wake.drain)

    app.steps["consumer"].add(WakeOnShutdown)

    # Celery's signals are global: a shutdown of any worker in this process wakes this
    # one's hub too, which then only turns once more.
    @worker_shutting_down.connect(weak=False)
    def _on_shutting_down(**_: Any) -> None:
        wake.wake()
