"""Redis commands packed by hiredis in C, and a synchronous client's batch of them sent
on one connection without redis-py's pipeline.

redis-py's pipeline checks every argument of every command in Python before hiredis
packs it, and wraps each execution in bookkeeping of its own: for an io worker's batch
scripts (thousands of arguments in a run) that was more CPU than the packing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import hiredis
import redis
from redis.exceptions import DataError, ResponseError


def pack(commands: Iterable[Sequence[Any]]) -> bytes:
    """Commands in the Redis protocol, packed by hiredis in C."""
    return b"".join(pack_one(args) for args in commands)


def pack_one(args: Sequence[Any]) -> bytes:
    """One command; its words as redis-py takes them: "CONFIG GET" is two words, and
    bytearrays and memoryviews are bytes (hiredis packs str, bytes, int and float)."""
    name = args[0]
    if isinstance(name, str | bytes) and (" " in name if isinstance(name, str) else b" " in name):
        args = (*name.split(), *args[1:])
    try:
        packed: bytes = hiredis.pack_command(tuple(args))
    except TypeError:
        words = tuple(bytes(a) if isinstance(a, bytearray | memoryview) else a for a in args)
        try:
            packed = hiredis.pack_command(words)  # type: ignore[arg-type]
        except TypeError as exc:
            raise DataError(f"cannot send {command_name(name)!r} to Redis: {exc}") from exc
    return packed


def command_name(name: Any) -> bytes:
    """A command's name as Redis reads it: its first word, upper-cased."""
    word = name.encode() if isinstance(name, str) else bytes(name)
    return word.split(b" ", 1)[0].upper()


def send_all(client: redis.Redis, commands: Sequence[Sequence[Any]]) -> list[Any]:
    """The replies of `commands`, sent in one write on one of `client`'s connections, as
    a pipeline without a transaction sends them: each reply as the connection parses it
    (no response callbacks: a hash is a flat list), an error reply in its place, not
    raised. A connection error is retried as the client retries its pipelines (every
    command sent again, on a new connection), then raised."""
    if not commands:
        return []
    packed = [pack(commands)]
    pool = client.connection_pool
    connection: Any = pool.get_connection()  # redis-py leaves its connections untyped

    def attempt() -> list[Any]:
        connection.send_packed_command(packed)
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(connection.read_response())
            except ResponseError as exc:
                replies.append(exc)
        return replies

    try:
        replies: list[Any] = connection.retry.call_with_retry(
            attempt, lambda _: connection.disconnect()
        )
        return replies
    except BaseException:
        connection.disconnect()  # replies may be left unread: the connection is not reused
        raise
    finally:
        pool.release(connection)
