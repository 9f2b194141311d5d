"""MCP client sessions kept open and reused by every call of a process's event loop.

A worker's calls all run on its process's call loop: the first call to a server opens a
session (for stdio: starts the server process), later calls reuse it, concurrent calls
share it (JSON-RPC requests are multiplexed). A session that died is reopened (one idle
for a while is probed first); a call during which the connection failed is retried once,
only when the tool says it is read-only or idempotent.

Each session lives in a task of its own that holds the SDK's context managers (anyio
requires entering and leaving them in one task). That task is started outside the
calling tool's context, so the call loop does not count it as the call's and cancel it
when the call ends.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
import weakref
from collections import OrderedDict
from collections.abc import Coroutine, Mapping
from typing import Any

from mcp import Client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, CallToolResult

from toolfleet.shared.errors import ToolError
from toolfleet.shared.mcp_tools.connection import ConnectionParams

log = logging.getLogger(__name__)

# Open sessions one process keeps; past it the least recently used one is closed (each
# stdio session is a server process; each per-user HTTP session holds a connection).
MAX_SESSIONS = 32
# Seconds a closing session gets to shut its server down.
CLOSE_TIMEOUT_S = 5.0
# A session idle this long (seconds) is probed with a harmless request before a call is
# sent on it (as database pools pre-ping): a server that died meanwhile is found before
# the call, which then goes to a new session - no doubt whether it ran.
PROBE_AFTER_IDLE_S = 5.0


def detached(coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """Start `coro` as a task that belongs to no tool call (an empty context)."""
    loop = asyncio.get_running_loop()
    return contextvars.Context().run(loop.create_task, coro)


class Session:
    """One open MCP client session, owned by its own task."""

    def __init__(self, connection: ConnectionParams, headers: Mapping[str, str]) -> None:
        self.connection = connection
        self._headers = dict(headers)
        self._stop = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None
        self.client: Client | None = None
        self.last_used = time.monotonic()

    async def open(self) -> None:
        """Connect and complete the handshake within the connection's timeout."""
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._task = detached(self._own(ready))
        try:
            self.client = await asyncio.wait_for(asyncio.shield(ready), self.connection.timeout)
        except BaseException:
            await self.close()
            raise

    async def _own(self, ready: asyncio.Future[Client]) -> None:
        transport = self.connection.transport(self._headers)
        try:
            async with Client(transport, cache=None) as client:
                ready.set_result(client)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif not isinstance(exc, asyncio.CancelledError):
                log.debug("%s: session ended: %r", self.connection.describe(), exc)

    def alive(self) -> bool:
        """Whether the session can still send: its task runs and its connection is open."""
        if self.client is None or self._task is None or self._task.done():
            return False
        # The SDK marks its dispatcher closed once the transport's read side ends (a
        # stdio server that exited); it has no public flag for it.
        dispatcher = getattr(self.client.session, "_dispatcher", None)
        return not getattr(dispatcher, "_closed", False)

    async def usable(self) -> bool:
        """Alive, and if idle for PROBE_AFTER_IDLE_S, answering a harmless request."""
        if not self.alive():
            return False
        if time.monotonic() - self.last_used < PROBE_AFTER_IDLE_S:
            return True
        assert self.client is not None
        try:
            async with asyncio.timeout(self.connection.timeout):
                await self.client.list_tools()
        except Exception as exc:
            log.info("%s: idle session did not answer (%r)", self.connection.describe(), exc)
            return False
        self.last_used = time.monotonic()
        return True

    async def close(self) -> None:
        """Leave the session (stops a stdio server); bounded by CLOSE_TIMEOUT_S."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT_S)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()


class SessionPool:
    """The open sessions of one event loop, by connection key."""

    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._max = max_sessions
        self.opened = 0  # sessions opened so far (for tests and the benchmark)

    async def session(self, connection: ConnectionParams, headers: Mapping[str, str]) -> Session:
        """The open session for `connection` with `headers`, opened (or reopened) if need be."""
        key = connection.key(headers)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            found = self._sessions.get(key)
            if found is not None and await found.usable():
                self._sessions.move_to_end(key)
                return found
            if found is not None:
                log.warning("%s: session was closed; reopening", connection.describe())
                del self._sessions[key]
                await found.close()
            session = Session(connection, headers)
            try:
                await session.open()
            except Exception as exc:
                raise ToolError(
                    f"cannot connect to {connection.describe()}: {type(exc).__name__}: {exc}"
                ) from exc
            self.opened += 1
            self._sessions[key] = session
            await self._evict()
            return session

    async def _evict(self) -> None:
        while len(self._sessions) > self._max:
            key, oldest = self._sessions.popitem(last=False)
            await oldest.close()
        # Locks of keys without a session, unless in use (per-user keys would pile up).
        for key in [k for k, lock in self._locks.items() if k not in self._sessions]:
            if not self._locks[key].locked():
                del self._locks[key]

    async def call_tool(
        self,
        connection: ConnectionParams,
        headers: Mapping[str, str],
        name: str,
        args: dict[str, Any],
        *,
        retry_safe: bool,
        progress: ProgressFnT | None = None,
    ) -> CallToolResult:
        """Call tool `name` on the server; reopen a dead session and retry once when safe."""
        session = await self.session(connection, headers)
        try:
            return await _call(session, name, args, progress)
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                raise
            if not retry_safe:
                raise ToolError(
                    f"the connection to {connection.describe()} closed during the call, so "
                    f"tool {name!r} may or may not have run; it was not retried (not marked "
                    "idempotent)"
                ) from exc
            log.warning("%s: closed during %s; retrying once", connection.describe(), name)
        session = await self.session(connection, headers)
        return await _call(session, name, args, progress)

    async def close(self) -> None:
        """Close every session."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)


async def _call(
    session: Session, name: str, args: dict[str, Any], progress: ProgressFnT | None
) -> CallToolResult:
    assert session.client is not None
    result = await session.client.call_tool(name, args, progress_callback=progress)
    session.last_used = time.monotonic()
    return result


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, SessionPool] = (
    weakref.WeakKeyDictionary()
)


def session_pool() -> SessionPool:
    """The session pool of the running event loop (a worker's call loop: one per process)."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = SessionPool()
    return pool


async def close_sessions() -> None:
    """Close the sessions of the running event loop (a worker process shutting down)."""
    pool = _pools.pop(asyncio.get_running_loop(), None)
    if pool is not None:
        await pool.close()
