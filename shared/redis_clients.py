"""Every Redis client toolfleet makes, from the one URL in TOOLFLEET_REDIS_URL.

A URL names either one server (`redis://`, `rediss://`, `unix://`) or a master that
Redis Sentinel manages:

    redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB][?sentinel_password=P]

HOST:PORT are the sentinels, SERVICE the master's name in their configuration, USER and
PASSWORD those of the data servers (master and replicas), `sentinel_password` the
sentinels' own (`requirepass` in sentinel.conf), when they have one. One URL rather than
separate settings: the same value already reaches every process (orchestrators, workers,
the CLI, the broker of Celery), so no component can follow a different topology.

A client of a Sentinel URL asks the sentinels for the master's address on every new
connection and drops a connection whose server answers READONLY (a demoted master), so
after a failover its retries (toolfleet.shared.outages) reach the new master.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, unquote

import redis
import redis.asyncio as aioredis
import redis.asyncio.sentinel as async_sentinel
import redis.sentinel

from toolfleet.shared.errors import ConfigError

SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_URL_FORM = (
    "redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]"
    "[?sentinel_password=PASSWORD]"
)
# A sentinel that does not answer within this long is skipped for the next one (s).
SENTINEL_TIMEOUT_S = 1.0
DEFAULT_SENTINEL_PORT = 26379


@dataclass(frozen=True)
class SentinelTarget:
    """A Sentinel URL, parsed: where the sentinels are and which master they manage."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None

    def master_options(self) -> dict[str, Any]:
        """Connection options of the data servers (AUTH and SELECT)."""
        options: dict[str, Any] = {"db": self.db}
        if self.password is not None:
            options["password"] = self.password
        if self.username:
            options["username"] = self.username
        return options

    def sentinel_options(self) -> dict[str, Any]:
        """Connection options of the sentinels themselves."""
        options: dict[str, Any] = {
            "socket_timeout": SENTINEL_TIMEOUT_S,
            "socket_connect_timeout": SENTINEL_TIMEOUT_S,
        }
        if self.sentinel_password is not None:
            options["password"] = self.sentinel_password
        return options


def is_sentinel(url: str) -> bool:
    """Whether `url` names a Sentinel-managed master."""
    return url.startswith(f"{SENTINEL_SCHEME}://")


def sentinel_target(url: str) -> SentinelTarget:
    """The parts of a `redis+sentinel://` URL; ConfigError saying the form when it is not one."""
    if not is_sentinel(url):
        raise ConfigError(f"not a Sentinel URL: use {SENTINEL_URL_FORM}")
    rest, _, query = url.removeprefix(f"{SENTINEL_SCHEME}://").partition("?")
    netloc, _, path = rest.partition("/")
    auth, _, hosts = netloc.rpartition("@")
    username = password = None
    if auth:
        user, has_password, secret = auth.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if has_password else None
    sentinels = tuple(_host_port(part) for part in hosts.split(",") if part)
    parts = [p for p in path.split("/") if p]
    if not sentinels or not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise ConfigError(
            f"TOOLFLEET_REDIS_URL is not a Sentinel URL of the form {SENTINEL_URL_FORM}"
        )
    options = parse_qs(query)
    unknown = set(options) - {"sentinel_password"}
    if unknown:
        raise ConfigError(
            f"TOOLFLEET_REDIS_URL has options a Sentinel URL does not take: {sorted(unknown)} "
            f"(only sentinel_password): {SENTINEL_URL_FORM}"
        )
    sentinel_password = options.get("sentinel_password", [None])[-1]
    return SentinelTarget(
        sentinels=sentinels,
        service=unquote(parts[0]),
        db=int(parts[1]) if len(parts) == 2 else 0,
        username=username,
        password=password,
        sentinel_password=sentinel_password,
    )


def _host_port(part: str) -> tuple[str, int]:
    if part.startswith("["):  # [IPv6]:port
        host, _, port = part[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = part.rpartition(":") if ":" in part else (part, "", "")
    if not host or (port and not port.isdigit()):
        raise ConfigError(f"TOOLFLEET_REDIS_URL names a sentinel {part!r}: use {SENTINEL_URL_FORM}")
    return host, int(port) if port else DEFAULT_SENTINEL_PORT


class _MasterConnection(redis.sentinel.SentinelManagedConnection):
    """A connection to the master that asks the sentinels where it is whenever it
    reconnects. redis-py's own reconnects a broken connection, when a retry sends the
    command again, to the address it had: the dead master, for the whole retry."""

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self._sock:
            self._connect_retry()  # type: ignore[no-untyped-call]
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]


class _AsyncMasterConnection(async_sentinel.SentinelManagedConnection):
    """The asyncio `_MasterConnection`."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self.is_connected:
            await self._connect_retry()  # type: ignore[no-untyped-call]
        await super().send_packed_command(command, check_health)


class _SentinelPool(redis.sentinel.SentinelConnectionPool):
    """A pool of connections to the master that closes its clients of the sentinels
    with its own connections: left open, their sockets warn when collected."""

    def disconnect(self, inuse_connections: bool = True) -> None:
        super().disconnect(inuse_connections)
        if inuse_connections:  # closing, not a switch to a new master
            for sentinel in self.sentinel_manager.sentinels:
                sentinel.close()


class _SentinelBlockingPool(_SentinelPool, redis.BlockingConnectionPool):
    """A pool of connections to the master that waits for a free one (as
    BlockingConnectionPool) instead of raising past its size."""


class _AsyncSentinelPool(async_sentinel.SentinelConnectionPool):
    """A pool of connections to the master that closes its clients of the sentinels
    with its own connections (an asyncio connection left open warns when collected)."""

    async def disconnect(self, inuse_connections: bool = True) -> None:
        await super().disconnect(inuse_connections)
        if inuse_connections:  # closing, not a switch to a new master
            await self.sentinel_manager.aclose()


class _AsyncSentinelBlockingPool(_AsyncSentinelPool, aioredis.BlockingConnectionPool):
    """The asyncio `_SentinelBlockingPool`."""


def sync_client(
    url: str, *, max_connections: int | None = None, pool_wait_s: float = 20.0, **options: Any
) -> redis.Redis:
    """A synchronous client of the Redis (or the Sentinel-managed master) at `url`.

    `options` are redis-py's connection options (retry, socket timeouts). With
    `max_connections`, threads share a pool of that many connections and wait up to
    `pool_wait_s` for a free one."""
    if is_sentinel(url):
        target = sentinel_target(url)
        manager = redis.sentinel.Sentinel(  # type: ignore[no-untyped-call, unused-ignore]
            list(target.sentinels), sentinel_kwargs=target.sentinel_options()
        )
        kwargs: dict[str, Any] = {
            **target.master_options(),
            "connection_class": _MasterConnection,
            "connection_pool_class": _SentinelPool,
            **options,
        }
        if max_connections is not None:
            kwargs |= {
                "max_connections": max_connections,
                "timeout": pool_wait_s,
                "connection_pool_class": _SentinelBlockingPool,
            }
        client: redis.Redis = manager.master_for(  # type: ignore[no-untyped-call, unused-ignore]
            target.service, **kwargs
        )
        return client
    if max_connections is None:
        return redis.Redis.from_url(url, **options)
    pool = redis.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=pool_wait_s, **options
    )
    return redis.Redis(connection_pool=pool)


def redis_client(url: str) -> redis.Redis:
    """A synchronous client of the Redis at `url` (TOOLFLEET_REDIS_URL).

    For scripts and health checks: `redis_client(Settings().require_redis_url())`.

    Args:
        url: One server (`redis://`, `rediss://`, `unix://`), or a Sentinel-managed master
            (`redis+sentinel://...`), whose address the client asks the sentinels for on
            each new connection.

    Returns:
        A redis-py client; it connects on its first command.

    Raises:
        ConfigError: `url` is a `redis+sentinel://` URL of the wrong form, saying the form.
    """
    return sync_client(url)


def async_pool(
    url: str,
    *,
    max_connections: int | None = None,
    pool_wait_s: float | None = None,
    **options: Any,
) -> aioredis.ConnectionPool:
    """An asyncio connection pool for `url`: blocking (waits up to `pool_wait_s` for a
    free connection) when `pool_wait_s` is given, redis-py's plain pool otherwise."""
    size: dict[str, Any] = {} if max_connections is None else {"max_connections": max_connections}
    if is_sentinel(url):
        target = sentinel_target(url)
        manager = async_sentinel_manager(target)
        kwargs: dict[str, Any] = {**manager.connection_kwargs, **target.master_options()}
        kwargs |= {**options, **size, "is_master": True}
        kwargs.setdefault("connection_class", _AsyncMasterConnection)
        if pool_wait_s is not None:
            return _AsyncSentinelBlockingPool(  # type: ignore[no-untyped-call]
                target.service, manager, timeout=pool_wait_s, **kwargs
            )
        return _AsyncSentinelPool(target.service, manager, **kwargs)  # type: ignore[no-untyped-call]
    if pool_wait_s is not None:
        return aioredis.BlockingConnectionPool.from_url(url, timeout=pool_wait_s, **size, **options)
    return aioredis.ConnectionPool.from_url(url, **size, **options)


def async_client(url: str, **options: Any) -> aioredis.Redis:
    """An asyncio client of `url` that owns (and closes) its own pool."""
    return aioredis.Redis.from_pool(async_pool(url, **options))


def async_sentinel_manager(target: SentinelTarget) -> async_sentinel.Sentinel:
    """An asyncio client of `target`'s sentinels (discover_master finds the master)."""
    return async_sentinel.Sentinel(  # type: ignore[no-untyped-call, unused-ignore]
        list(target.sentinels), sentinel_kwargs=target.sentinel_options()
    )


def broker_connection(url: str) -> tuple[str, dict[str, Any]]:
    """kombu's broker URL for `url` and the transport options it needs besides.

    kombu's Sentinel transport takes `sentinel://HOST:PORT;sentinel://...` (each
    sentinel a URL carrying the data servers' credentials and database) and the master's
    name as the transport option `master_name`."""
    if not is_sentinel(url):
        return url, {}
    target = sentinel_target(url)
    auth = ""
    if target.password is not None:
        auth = f"{target.username or ''}:{_quoted(target.password)}@"
    hosts = ";".join(
        f"sentinel://{auth}{_netloc_host(host)}:{port}/{target.db}"
        for host, port in target.sentinels
    )
    options: dict[str, Any] = {
        "master_name": target.service,
        "sentinel_kwargs": target.sentinel_options(),
    }
    return hosts, options


def _quoted(value: str) -> str:
    return quote(value, safe="")


def _netloc_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
