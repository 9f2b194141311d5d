"""One Redis connection for all of an orchestrator's short commands, pipelined by itself.

redis-py's asyncio client takes a connection from its pool for every command or
pipeline, sends it in a write of its own and reads the reply under a timeout, with its
retry and observability wrappers around each: about 100 us of CPU per round trip, even
for a PING, and a `send` system call each. At 200 concurrent sessions an orchestrator
made ~7 sends per turn and spent 40% of its CPU in redis-py.

Here every command and pipeline issued during one event-loop iteration goes out in one
write on one connection, and replies are matched to their callers in order (Redis
answers a connection's commands in the order sent). A caller's pipeline stays
contiguous on the wire, so a MULTI/EXEC of one caller is never interleaved with another's.

`AutoPipelinedRedis` is a redis-py client: commands that block (BLPOP, XREAD) or hold
state on their connection (WATCH, SUBSCRIBE) still take a connection from its pool.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence
from typing import Any, TypeVar, cast

import hiredis
import redis.asyncio as aioredis
import redis.asyncio.sentinel as async_sentinel
from redis._parsers.base import BaseParser
from redis._parsers.response_callbacks import get_response_callbacks
from redis.asyncio.client import Pipeline
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.client import CaseInsensitiveDict
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, ReadOnlyError, ResponseError

from toolfleet.shared.redis_clients import (
    async_sentinel_manager,
    is_sentinel,
    sentinel_target,
)
from toolfleet.shared.resp import command_name, pack, pack_one

# Commands that block the connection or change its state: they keep a pooled connection.
POOL_COMMANDS = frozenset(
    b"BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP BZPOPMIN BZPOPMAX BZMPOP XREAD XREADGROUP WAIT "
    b"WAITAOF WATCH UNWATCH MULTI EXEC DISCARD SELECT AUTH HELLO RESET QUIT CLIENT SUBSCRIBE "
    b"PSUBSCRIBE SSUBSCRIBE MONITOR SYNC PSYNC SHUTDOWN DEBUG".split()
)
CONNECT_TIMEOUT_S = 5.0
# The connection speaks RESP2 (redis-py's own default is RESP3 with callbacks that map
# its replies to these same shapes): a hash is a dict, SET NX a bool, as from redis-py.
_RESP2_CALLBACKS = get_response_callbacks(user_protocol=2, legacy_responses=True)
_CALLBACKS = CaseInsensitiveDict(_RESP2_CALLBACKS)  # type: ignore[arg-type]
# redis-py's options of a command that are not for its response callback (redis.client).
_EMPTY_RESPONSE = "EMPTY_RESPONSE"
_NOT_CALLBACK_OPTIONS = (_EMPTY_RESPONSE, "NEVER_DECODE", "keys")


class _Exchange:
    """One caller's commands on the wire, and the replies gathered for them so far."""

    __slots__ = ("count", "future", "replies")

    def __init__(self, count: int, future: asyncio.Future[list[Any]]) -> None:
        self.count = count
        self.future = future
        self.replies: list[Any] = []


class _Wire(asyncio.Protocol):
    """A connection: writes of one loop iteration joined, replies parsed by hiredis in C."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, follows_master: bool = False) -> None:
        self._loop = loop
        # A READONLY reply means the server was demoted: the connection is dropped, so
        # the retry reaches the master Sentinel names now.
        self._follows_master = follows_master
        # Error replies become exceptions (not raised), of redis-py's classes: NOSCRIPT is
        # a NoScriptError as with redis-py, at any depth (inside EXEC's reply too).
        self._reader = hiredis.Reader(protocolError=InvalidResponse, replyError=_error)
        self._waiting: collections.deque[_Exchange] = collections.deque()
        self._outbox: list[bytes] = []
        self._transport: asyncio.Transport | None = None
        self.lost: BaseException | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's are not asyncio.Transport subclasses).
        self._transport = cast(asyncio.Transport, transport)

    def send(self, packed: bytes, count: int) -> asyncio.Future[list[Any]]:
        """Queue `count` commands (packed) for this iteration's write; their replies."""
        future: asyncio.Future[list[Any]] = self._loop.create_future()
        if self.lost is not None:
            future.set_exception(_lost(self.lost))
            return future
        if not self._outbox:
            self._loop.call_soon(self._flush)
        self._outbox.append(packed)
        self._waiting.append(_Exchange(count, future))
        return future

    def _flush(self) -> None:
        data, self._outbox = b"".join(self._outbox), []
        if self._transport is not None and self.lost is None:
            self._transport.write(data)

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        try:
            while (reply := self._reader.gets()) is not False:
                if self._follows_master and isinstance(reply, ReadOnlyError):
                    self.close(RedisConnectionError("the master was demoted to a replica"))
                    return
                exchange = self._waiting[0]
                exchange.replies.append(reply)
                if len(exchange.replies) == exchange.count:
                    self._waiting.popleft()
                    if not exchange.future.done():  # else its caller was cancelled
                        exchange.future.set_result(exchange.replies)
        except (InvalidResponse, IndexError) as exc:  # garbage, or a reply nobody asked for
            self.close(RedisConnectionError(f"Redis sent an unexpected reply: {exc!r}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.close(exc or RedisConnectionError("Redis closed the connection"))

    def close(self, reason: BaseException) -> None:
        """Fail every caller still waiting; the connection is not used again."""
        if self.lost is None:
            self.lost = reason
        if self._transport is not None:
            self._transport.close()
        while self._waiting:
            future = self._waiting.popleft().future
            if not future.done():
                future.set_exception(_lost(reason))


class AutoPipeline:
    """The shared connection of one client: opened on first use and again after it broke
    (its waiting callers fail with ConnectionError; the client's retry policy resends)."""

    def __init__(self, url: str, name: str) -> None:
        self._sentinel: async_sentinel.Sentinel | None = None
        self._service = ""
        if is_sentinel(url):
            target = sentinel_target(url)
            self._sentinel = async_sentinel_manager(target)
            self._service = target.service
            options: dict[str, Any] = target.master_options()
        else:
            options = dict(parse_url(url))
        self._path: str | None = options.get("path")
        self._host = str(options.get("host") or "localhost")
        self._port = int(options.get("port") or 6379)
        self._handshake = _handshake(options, name)
        self._wire: _Wire | None = None
        self._opening: asyncio.Lock | None = None

    @staticmethod
    def supports(url: str) -> bool:
        """Whether `url` is one this class connects to (plain TCP, a Unix socket, or the
        master of a Sentinel URL)."""
        return url.startswith(("redis://", "unix://")) or is_sentinel(url)

    async def call(self, packed: bytes, count: int) -> list[Any]:
        """Send `count` packed commands with this iteration's others; their replies."""
        wire = self._wire
        if wire is None or wire.lost is not None:
            wire = await self._open()
        return await wire.send(packed, count)

    async def _open(self) -> _Wire:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._wire is not None and self._wire.lost is None:
                return self._wire  # another caller opened it meanwhile
            loop = asyncio.get_running_loop()
            follows = self._sentinel is not None
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    if self._sentinel is not None:  # MasterNotFoundError is a ConnectionError
                        self._host, self._port = await self._sentinel.discover_master(self._service)
                    if self._path is not None:
                        _, wire = await loop.create_unix_connection(lambda: _Wire(loop), self._path)
                    else:
                        _, wire = await loop.create_connection(
                            lambda: _Wire(loop, follows_master=follows), self._host, self._port
                        )
            except (OSError, TimeoutError) as exc:
                where = self._path or f"{self._host}:{self._port}"
                raise RedisConnectionError(f"cannot connect to Redis at {where}: {exc}") from exc
            try:
                replies = await wire.send(pack(self._handshake), len(self._handshake))
            except BaseException as exc:  # cancelled meanwhile (a reader stopping), or lost
                wire.close(exc)
                raise
            # The name is a courtesy (an ACL may refuse CLIENT SETNAME); AUTH and SELECT not.
            failed = next((r for r in replies[:-1] if isinstance(r, Exception)), None)
            if failed is not None:  # a wrong password, a database out of range
                wire.close(failed)
                raise failed
            self._wire = wire
            return wire

    def close(self) -> None:
        """Close the connection (callers still waiting fail)."""
        if self._wire is not None:
            self._wire.close(RedisConnectionError("the client was closed"))
            self._wire = None

    async def aclose(self) -> None:
        """`close`, and the connections to the sentinels, if any."""
        self.close()
        if self._sentinel is not None:
            await self._sentinel.aclose()


class AutoPipelinedRedis(aioredis.Redis):
    """A redis-py asyncio client whose short commands share one auto-pipelined
    connection (see the module's text); build it with `over(pool, url)`."""

    _autopipeline: AutoPipeline
    _retry: Retry
    _pooled: frozenset[bytes]

    @classmethod
    def over(
        cls,
        pool: aioredis.ConnectionPool,
        url: str,
        retry: Retry,
        *,
        name: str = "toolfleet-orchestrator",
        dedicated: bool = False,
    ) -> AutoPipelinedRedis:
        """A client of `pool` (for the commands that need a connection of their own), its
        shared connection named `name`. `dedicated`: the client of one task, which may
        block its connection (XREAD BLOCK)."""
        client = cls(connection_pool=pool)
        client.auto_close_connection_pool = True  # as from_pool: the client owns its pool
        client._autopipeline = AutoPipeline(url, name)
        client._retry = retry
        client._pooled = frozenset() if dedicated else POOL_COMMANDS
        return client

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        """Run a command: on the shared connection, or on a pooled one if it blocks."""
        if _command_name(args[0]) in self._pooled:
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

        async def attempt() -> Any:
            (reply,) = await self._autopipeline.call(pack_one(args), 1)
            return _parsed(args[0], reply, options)

        return await self._retry.call_with_retry(attempt, _reconnects_by_itself)

    async def send_raw(self, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
        """`commands` in one caller's share of the shared connection's write (not a
        transaction), retried as the client retries; their replies as hiredis parsed
        them, without redis-py's response callbacks (a hash is a flat list of fields and
        values), and an error reply as the exception in its place. What a session read
        needs: redis-py's pipeline object and callbacks were two thirds of its CPU."""
        packed = pack(commands)

        async def attempt() -> list[Any]:
            return await self._autopipeline.call(packed, len(commands))

        return await self._retry.call_with_retry(attempt, _reconnects_by_itself)

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        """A pipeline whose commands go out together on the shared connection."""
        return _AutoPipelinedPipeline(self, transaction, shard_hint)

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        """Close the shared connection and, as redis-py's client does, the pool."""
        await self._autopipeline.aclose()
        await super().aclose(close_connection_pool)


class _AutoPipelinedPipeline(Pipeline):
    """A pipeline sent as one caller's contiguous share of the shared connection's write
    (WATCH, scripts registered with `register_script` and blocking commands: pooled)."""

    def __init__(self, client: AutoPipelinedRedis, transaction: bool, shard_hint: str | None):
        super().__init__(client.connection_pool, client.response_callbacks, transaction, shard_hint)
        self._client = client

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        stack = self.command_stack
        if (
            self.watching
            or self.scripts
            or any(_command_name(args[0]) in self._client._pooled for args, _ in stack)
        ):
            return await super().execute(raise_on_error)
        if not stack:
            return []
        transaction = self.is_transaction or self.explicit_transaction
        run = self._transaction if transaction else self._commands
        try:
            return await self._client._retry.call_with_retry(
                lambda: run(stack, raise_on_error), _reconnects_by_itself
            )
        finally:
            await self.reset()  # type: ignore[no-untyped-call]

    async def _commands(self, stack: list[Any], raise_on_error: bool) -> list[Any]:
        replies = await self._client._autopipeline.call(pack(args for args, _ in stack), len(stack))
        return self._results(stack, replies, raise_on_error)

    async def _transaction(self, stack: list[Any], raise_on_error: bool) -> list[Any]:
        commands = [("MULTI",), *(args for args, _ in stack), ("EXEC",)]
        replies = await self._client._autopipeline.call(pack(commands), len(commands))
        executed = replies[-1]
        if isinstance(executed, Exception):  # EXECABORT: a command was refused when queued
            queued = [r for r in replies[:-1] if isinstance(r, Exception)]
            raise (queued[0] if queued else executed)
        return self._results(stack, executed, raise_on_error)

    def _results(self, stack: list[Any], replies: list[Any], raise_on_error: bool) -> list[Any]:
        """The commands' replies as redis-py's pipeline gives them: parsed, an error in
        its command's place (raised, the first one, with `raise_on_error`)."""
        results = []
        for (args, options), reply in zip(stack, replies, strict=True):
            try:
                results.append(_parsed(args[0], reply, options))
            except ResponseError as error:
                results.append(error)
        if raise_on_error:
            self.raise_first_error(stack, results)
        return results


def _parsed(name: Any, reply: Any, options: dict[str, Any]) -> Any:
    """A reply as redis-py's `parse_response` gives it (its response callback applied)."""
    if isinstance(reply, ResponseError):
        if _EMPTY_RESPONSE in options:
            return options[_EMPTY_RESPONSE]
        raise reply
    callback = _callback(name)
    if callback is None:
        return reply
    extra = {k: v for k, v in options.items() if k not in _NOT_CALLBACK_OPTIONS}
    return callback(reply, **extra)


def _callback(name: Any) -> Any:
    """redis-py's RESP2 response callback of the command `name`, or None (remembered: the
    case-insensitive lookup upper-cases the name every time)."""
    try:
        return _CALLBACK_OF[name]
    except (KeyError, TypeError):  # not seen yet, or not hashable (a bytearray)
        return _remember(_CALLBACK_OF, name, _CALLBACKS.get(name))  # type: ignore[no-untyped-call]


_CALLBACK_OF: dict[str | bytes, Any] = {}


def _command_name(name: Any) -> bytes:
    """The command's name, upper-cased (remembered: a few dozen names, every command)."""
    try:
        return _NAMES[name]
    except (KeyError, TypeError):  # not seen yet, or not hashable (a bytearray)
        return _remember(_NAMES, name, command_name(name))


_NAMES: dict[str | bytes, bytes] = {}
_MAX_NAMES = 1024  # command names are few; a caller's odd spellings do not grow it further
_V = TypeVar("_V")


def _remember(table: dict[str | bytes, _V], name: Any, value: _V) -> _V:
    """`value`, kept in `table` under the command name `name` (a str or bytes, while the
    table is under _MAX_NAMES: the lookups above stay one dict access)."""
    if isinstance(name, str | bytes) and len(table) < _MAX_NAMES:
        table[name] = value
    return value


def _error(message: str) -> ResponseError:
    error: ResponseError = BaseParser.parse_error(message)  # type: ignore[no-untyped-call]
    return error


def _lost(reason: BaseException) -> RedisConnectionError:
    if isinstance(reason, RedisConnectionError):
        return reason
    return RedisConnectionError(f"the connection to Redis broke: {reason!r}")


def _handshake(options: dict[str, Any], name: str) -> list[tuple[Any, ...]]:
    """The commands a new connection sends first: AUTH and SELECT, as the URL asks, and
    its name, last (CLIENT LIST shows which connections are an orchestrator's)."""
    commands: list[tuple[Any, ...]] = []
    password, username = options.get("password"), options.get("username")
    if password is not None:
        commands.append(("AUTH", username, password) if username else ("AUTH", password))
    db = int(options.get("db") or 0)
    if db:
        commands.append(("SELECT", db))
    commands.append(("CLIENT", "SETNAME", name))
    return commands


async def _reconnects_by_itself(error: Exception) -> None:
    """The retry policy's failure hook: nothing to do, the next `call` reconnects."""
