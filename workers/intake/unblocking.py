"""Blocking Redis waits that a stopping worker cuts short.

A taker whose queue is empty blocks in BLMOVE for up to a second; a worker asked to stop
would wait that out before its intake could end. Redis's CLIENT UNBLOCK ends a blocked
command as if it had timed out: the stopping thread sends it, naming the connection by
its id, on another connection. Each wait runs on a client of one connection, whose id is
read before it blocks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import redis

from toolfleet.shared.outages import resilient_client

# How often a cut sends CLIENT UNBLOCK again while the wait's command is still on its way
# to Redis (an unblock that arrives first finds nothing blocked).
RESEND_S = 0.005


class UnblockableWaits:
    """Blocking commands on a connection of their own, which `cut` ends at once; `control`
    is the client the unblocking goes on."""

    def __init__(self, url: str, control: redis.Redis) -> None:
        # One connection: the id read before a wait is that of the connection it blocks.
        self.client = resilient_client(url, max_connections=1)
        self._control = control
        self._lock = threading.Lock()
        self._cut = False
        self._blocked: int | None = None  # the connection of the wait in progress
        self._returned = threading.Event()  # the wait in progress has returned

    def run(self, command: Callable[[redis.Redis], object]) -> None:
        """Run the blocking `command` on this client, unless the waits were cut."""
        try:
            connection: int | None = int(self.client.client_id())
        except redis.ResponseError:  # refused (an ACL without it): the wait runs its course
            connection = None
        with self._lock:
            if self._cut:
                return
            self._blocked = connection
            self._returned.clear()
        try:
            command(self.client)
        finally:
            with self._lock:
                self._blocked = None
                self._returned.set()

    def cut(self) -> None:
        """End the wait in progress, if any, and refuse every later one. Where Redis
        refuses CLIENT UNBLOCK (an ACL without it), the wait ends with its timeout."""
        with self._lock:
            self._cut = True
            blocked = self._blocked
        if blocked is None:
            return
        # Sent again until the wait returns: its command may not have reached Redis yet.
        while True:
            try:
                self._control.client_unblock(blocked)
            except redis.RedisError:
                return  # unreachable, or refused: the wait ends with its own timeout
            if self._returned.wait(RESEND_S):
                return

    def close(self) -> None:
        """Close the waits' connection (its pool is the client's own)."""
        self.client.close()
        self.client.connection_pool.disconnect()
