"""Group commit: the Redis commands of concurrent threads go out in one pipeline.

An io worker's calls end together (a turn's thousand calls of one second): each posting
its result alone would cost a round trip, a connection checkout and a socket write and
read per call. Here the first caller to arrive sends, and whoever arrives while it waits
for Redis is sent with the next pipeline: a thousand calls make a few round trips, and a
caller with no company waits for no one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import redis
from redis.client import Pipeline
from redis.exceptions import NoScriptError

from toolfleet.shared.scripts import LuaScript

# Commands of at most this many callers per pipeline.
MAX_CALLERS = 256
# A sender sends this many pipelines at most, then hands the sending to a waiting caller.
MAX_ROUNDS = 4

Commands = Callable[[Pipeline], None]


class _Entry:
    def __init__(self, add: Commands) -> None:
        self.add = add
        self.ready = threading.Event()  # done, or it is this caller's turn to send
        self.sends = False
        self.replies: list[Any] = []
        self.error: BaseException | None = None


class GroupCommit:
    """Runs each caller's commands in a pipeline shared with the callers of the moment
    (no transaction: each caller's commands run in order, others' may come between)."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._waiting: list[_Entry] = []
        self._sending = False

    def execute(self, add: Commands) -> list[Any]:
        """The replies to the commands `add` puts on the pipeline it is given; the error
        of the first of them that failed is raised, as a pipeline's execute raises it."""
        entry = _Entry(add)
        with self._lock:
            self._waiting.append(entry)
            entry.sends = not self._sending
            self._sending = True
        if not entry.sends:
            entry.ready.wait()
        if entry.sends:
            self._send_for_all()
        if entry.error is not None:
            raise entry.error
        return entry.replies

    def run_script(self, script: LuaScript, numkeys: int, *args: Any) -> Any:
        """`script`'s reply, run by its SHA1 in a shared pipeline; by its text, alone, when
        the server does not know it yet (NOSCRIPT: nothing ran, so it runs once).

        A caller with no company (a prefork child runs one call at a time) sends it as a
        plain command: a pipeline's machinery cost it more than the script itself.
        """
        with self._lock:
            alone = not self._sending
            self._sending = True
        if not alone:
            try:
                (reply,) = self.execute(lambda pipe: pipe.evalsha(script.sha, numkeys, *args))
            except NoScriptError:
                reply = script.run_sync(self._client, numkeys, *args)
            return reply
        try:
            return script.run_sync(self._client, numkeys, *args)
        finally:
            self._send_for_all()  # whoever came meanwhile waits for a sender

    def _send_for_all(self) -> None:
        """Send what is waiting, round after round; then stop sending or hand it over."""
        for _ in range(MAX_ROUNDS):
            with self._lock:
                if not self._waiting:
                    self._sending = False
                    return
                batch = self._waiting[:MAX_CALLERS]
                del self._waiting[:MAX_CALLERS]
            self._send(batch)
        with self._lock:
            if not self._waiting:
                self._sending = False
                return
            successor = self._waiting[0]  # it sends next; this caller goes back to its work
            successor.sends = True
        successor.ready.set()

    def _send(self, batch: list[_Entry]) -> None:
        pipe = self._client.pipeline(transaction=False)
        sizes = []
        for entry in batch:
            before = len(pipe.command_stack)
            try:
                entry.add(pipe)
            except Exception as exc:  # a caller's own bug stays its own
                del pipe.command_stack[before:]
                entry.error = exc
            sizes.append(len(pipe.command_stack) - before)
        try:
            replies = pipe.execute(raise_on_error=False) if pipe.command_stack else []
        except Exception as exc:  # the connection: every caller of the batch gets it
            for entry in batch:
                entry.error = entry.error or exc
                entry.ready.set()
            return
        start = 0
        for entry, size in zip(batch, sizes, strict=True):
            entry.replies = replies[start : start + size]
            start += size
            failed = next((r for r in entry.replies if isinstance(r, Exception)), None)
            entry.error = entry.error or failed
            entry.ready.set()
