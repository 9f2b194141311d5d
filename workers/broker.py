"""kombu's Redis transport for the worker's consumer, with one synchronous client per
channel instead of one per command.

kombu builds a new `redis.Redis` for every synchronous operation of a channel: each
batch of task events it publishes (the `-E` events Flower shows), each ack and each
unacked-index write. Under redis-py 8 building one costs more than the command it
sends: a quarter of a prefork worker's main-process CPU went to `Redis.__init__`
(bench/RESULTS.md). The client holds no connection of its own (the channel's pool
does), so one per pool serves every operation; a new pool (kombu makes one after a
connection error) gets a new client.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from kombu.transport import redis as kombu_redis

# The URL schemes kombu serves with its plain Redis transport (sentinel:// has its own).
PLAIN_REDIS_SCHEMES = frozenset({"redis", "rediss"})


class Channel(kombu_redis.Channel):
    """A channel whose synchronous client is built once per connection pool."""

    _sync_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)  # type: ignore[misc]
        client = self._sync_client
        if client is None or client.connection_pool is not self.pool:
            client = self._sync_client = super()._create_client()  # type: ignore[misc]
        return client


class Transport(kombu_redis.Transport):
    """kombu's Redis transport with `Channel`."""

    Channel = Channel


def broker_transport(url: str) -> str | None:
    """The transport for the worker's broker `url`: ours for a plain Redis URL, None
    (kombu's choice by scheme) for any other."""
    if urlparse(url).scheme in PLAIN_REDIS_SCHEMES:
        return f"{Transport.__module__}:{Transport.__qualname__}"
    return None
