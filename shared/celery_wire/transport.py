"""kombu's Redis transport for the worker's consumer, with one synchronous client per
channel instead of one per command, and channels that close after Redis went away.

kombu builds a new `redis.Redis` for every synchronous operation of a channel: each
batch of task events it publishes (the `-E` events Flower shows), each ack and each
unacked-index write. Under redis-py 8 building one costs more than the command it
sends: a quarter of a prefork worker's main-process CPU went to `Redis.__init__`
(bench/RESULTS.md). The client holds no connection of its own (the channel's pool
does), so one per pool serves every operation; a new pool (kombu makes one after a
connection error) gets a new client.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from queue import Empty
from typing import Any
from urllib.parse import urlparse

from kombu.transport import redis as kombu_redis

from toolfleet.shared.redis_clients import is_sentinel

# The URL schemes kombu serves with its plain Redis transport (sentinel:// has its own).
PLAIN_REDIS_SCHEMES = frozenset({"redis", "rediss"})


class _OneClientPerPool:
    """The synchronous client of a channel, built once per connection pool."""

    _sync_client: Any = None
    pool: Any

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)  # type: ignore[misc]
        client = self._sync_client
        if client is None or client.connection_pool is not self.pool:
            client = self._sync_client = super()._create_client()  # type: ignore[misc]
        return client


class _ClosesAfterConnectionLoss:
    """A channel whose close goes on when its BRPOP's connection is gone.

    kombu's close first reads the reply of the BRPOP in flight; on a connection Redis
    dropped (restarted, failed over) that read raises, and the close stops there, the
    channel still open with its unacknowledged messages. Celery's consumer then lets go
    of the broken connection's transport and closes the connection, which closes the
    channel again: its restore of those messages builds a connection pool from the
    transport, gone by then, and the AttributeError stops the worker for good. Here the
    close goes on past a failed read: it restores those messages, or cannot reach Redis
    either (a connection error, which Celery ignores: kombu's sweep restores them once
    the visibility timeout has passed), and the channel is closed."""

    # kombu's Channel has these.
    _in_poll: Any
    _brpop_read: Callable[[], bool]
    connection_errors: tuple[type[BaseException], ...]

    def close(self) -> None:
        if self._in_poll:
            # No reply yet, or none coming (the read dropped the connection).
            no_reply: tuple[type[BaseException], ...] = (Empty, *self.connection_errors)
            with contextlib.suppress(*no_reply):
                self._brpop_read()
        super().close()  # type: ignore[misc]


class Channel(_ClosesAfterConnectionLoss, _OneClientPerPool, kombu_redis.Channel):
    """A channel whose synchronous client is built once per connection pool, and whose
    close survives a lost connection."""


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with `Channel`."""

    Channel = Channel


class SentinelChannel(_ClosesAfterConnectionLoss, _OneClientPerPool, kombu_redis.SentinelChannel):
    """kombu's Sentinel channel (its pools ask the sentinels for the master on every
    new connection) with one synchronous client per connection pool, and a close that
    survives the master's death."""


class SentinelTransport(kombu_redis.SentinelTransport):
    """kombu's Sentinel transport with `SentinelChannel`."""

    Channel = SentinelChannel


def broker_transport(url: str) -> str | None:
    """The transport for the worker's broker at toolfleet's `url`: ours for a plain Redis
    URL or a `redis+sentinel://` one (its broker URL: shared.redis_clients.broker_connection),
    None (kombu's choice by scheme) for any other."""
    if is_sentinel(url):
        return f"{SentinelTransport.__module__}:{SentinelTransport.__qualname__}"
    if urlparse(url).scheme in PLAIN_REDIS_SCHEMES:
        return f"{Transport.__module__}:{Transport.__qualname__}"
    return None
