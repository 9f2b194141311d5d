"""Acknowledge a write only once a replica has it, so that a failover cannot lose it.

Redis replicates asynchronously: a write the master acknowledged may not have reached a
replica when the master dies, and the replica Sentinel promotes never had it. What
toolfleet acknowledges to someone else - a posted completion (202, `post_result`), a
stored session write (a turn, the calls it sent), a tool result a worker reports
before it acks its task - first waits (WAIT) until `replicas` replicas have every write
made so far, for at most `timeout_ms`.

WAIT counts the writes of its own connection; a client's pool may hand the next command
another one. So the wait goes with a write of its own (a key under the prefix) on the
connection that sends the WAIT: the replication stream is ordered, so a replica that
has this write has every write the master applied before it.

A wait that times out (no replica connected, or one far behind) logs a warning and
acknowledges all the same: the fleet goes on with the guarantee of a single Redis and
says so. Until enough replicas are connected again (ROLE lists them, one round trip per
write), writes are acknowledged at once rather than each waiting out the timeout.

A script the server does not know (NOSCRIPT: a master just promoted, or restarted) ran
nothing, and is sent again with its text: a new write, which waits for the replicas in
turn - unless the wait sent with the first try fell short and ROLE still lists too few,
when it is acknowledged at once like any write then. Each process's first script after a
failover so waits out the timeout once, not twice.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from toolfleet.shared.config import Settings
from toolfleet.shared.redis_clients import is_sentinel
from toolfleet.shared.resp import send_all
from toolfleet.shared.scripts import LuaScript

log = logging.getLogger(__name__)

# The barrier's own key lives this long after its last write (ms).
_BARRIER_TTL_MS = 60_000


class Replication:
    """Wait for `replicas` replicas, at most `timeout_ms`, writing `key` to do so."""

    def __init__(self, replicas: int, timeout_ms: int, key: str) -> None:
        self.replicas = replicas
        self.timeout_ms = timeout_ms
        self.key = key
        # Set when a wait fell short: check ROLE before waiting again.
        self._short = False

    @classmethod
    def of(cls, settings: Settings) -> Replication:
        """The policy of `settings`: TOOLFLEET_REDIS_WAIT_REPLICAS (by default 1 for a
        Sentinel URL, 0 for a single Redis) and TOOLFLEET_REDIS_WAIT_TIMEOUT_S."""
        replicas = settings.redis_wait_replicas
        if replicas is None:
            replicas = 1 if is_sentinel(settings.redis_url or "") else 0
        timeout_ms = max(1, round(settings.redis_wait_timeout_s * 1000))
        return cls(replicas, timeout_ms, f"{settings.key_prefix}:replicated")

    def commands(self) -> list[tuple[Any, ...]]:
        """The barrier: a write, then WAIT, on one connection."""
        return [
            ("SET", self.key, "1", "PX", _BARRIER_TTL_MS),
            ("WAIT", self.replicas, self.timeout_ms),
        ]

    def run_all_sync(
        self, client: redis.Redis, script: LuaScript, calls: Sequence[Sequence[Any]]
    ) -> list[Any]:
        """`script.run_all`, answered once the replicas have its writes. The wait goes in
        the same pipeline: a retry after a lost connection (a failover) sends both again
        to the new master, and toolfleet's scripts apply once however often they are sent."""

        def role() -> Any:
            return client.execute_command("ROLE")  # type: ignore[no-untyped-call]

        if not self._waits(role):
            return script.run_all(client, calls)
        sends = 0

        def send(commands: list[tuple[Any, ...]]) -> list[Any]:
            # The first waits (asked above); a resend by text asks again.
            nonlocal sends
            sends += 1
            return self._send_sync(client, commands, wait=sends == 1 or self._waits(role))

        return script.run_all(client, calls, send)

    def run_sync(self, client: redis.Redis, script: LuaScript, numkeys: int, *args: Any) -> Any:
        """`script.run_sync`, answered once the replicas have its writes."""
        (reply,) = self.run_all_sync(client, script, [(numkeys, *args)])
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def run(self, client: aioredis.Redis, script: LuaScript, numkeys: int, *args: Any) -> Any:
        """`script.run`, answered once the replicas have its writes (see `run_all_sync`)."""
        if not await self._waits_async(client):
            return await script.run(client, numkeys, *args)
        (reply,) = await self._send(client, [("EVALSHA", script.sha, numkeys, *args)])
        if isinstance(reply, NoScriptError):
            text = ("EVAL", script.text, numkeys, *args)
            (reply,) = await self._send(client, [text], wait=await self._waits_async(client))
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def wait(self, client: aioredis.Redis) -> None:
        """Return once the replicas have every write made so far (or the timeout)."""
        if await self._waits_async(client):
            await self._send(client, [])

    @property
    def waits(self) -> bool:
        """Whether writes wait for replicas at all (none asked for: a single Redis)."""
        return self.replicas > 0

    def _waits(self, role: Callable[[], Any]) -> bool:
        """Whether to wait: not without replicas to wait for, nor while too few are
        connected after a wait fell short (each write would wait out the timeout)."""
        return self.waits and (not self._short or _connected(role()) >= self.replicas)

    async def _waits_async(self, client: aioredis.Redis) -> bool:
        """`_waits`, asking ROLE through an asyncio client."""
        if not self.waits:
            return False
        if not self._short:
            return True
        return _connected(await client.execute_command("ROLE")) >= self.replicas  # type: ignore[no-untyped-call]

    def _send_sync(
        self, client: redis.Redis, commands: list[tuple[Any, ...]], *, wait: bool = True
    ) -> list[Any]:
        """The replies of `commands`, sent in one pipeline with the barrier (`wait`)."""
        barrier = self.commands() if wait else []
        replies = send_all(client, [*commands, *barrier])
        if wait:
            self._check(replies[-1])
        return replies[: len(commands)]

    async def _send(
        self, client: aioredis.Redis, commands: list[tuple[Any, ...]], *, wait: bool = True
    ) -> list[Any]:
        """`_send_sync` for an asyncio client."""
        # A pipeline with WAIT goes on a pooled connection of an auto-pipelined client:
        # WAIT blocks its connection, and the shared one must not wait.
        barrier = self.commands() if wait else []
        pipe = client.pipeline(transaction=False)
        for command in [*commands, *barrier]:
            pipe.execute_command(*command)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        if wait:
            self._check(replies[-1])
        return replies[: len(commands)]

    def _check(self, acked: Any) -> None:
        if isinstance(acked, redis.ConnectionError):
            raise acked  # the master went away: the write is not acknowledged
        count = 0 if isinstance(acked, Exception) else int(acked)
        short = count < self.replicas
        if short and not self._short:
            log.warning(
                "writes are acknowledged with %d of %d replicas holding them after %d ms "
                "(%s): a failover now may lose them; waiting again once enough replicas "
                "are connected",
                count,
                self.replicas,
                self.timeout_ms,
                acked if isinstance(acked, Exception) else "replicas down or behind",
            )
        elif self._short and not short:
            log.warning("writes wait for %d replicas again", self.replicas)
        self._short = short


def _connected(role: Any) -> int:
    """How many replicas ROLE's reply on a master lists (0 from anything else)."""
    if not isinstance(role, list | tuple) or len(role) < 3 or role[0] not in (b"master", "master"):
        return 0
    return len(role[2])


# Acknowledges at once: for a single Redis, or when the settings ask for no replica.
NO_WAIT = Replication(0, 1, "")


_POLICIES: weakref.WeakKeyDictionary[Any, Replication] = weakref.WeakKeyDictionary()


def attach(client: redis.Redis | aioredis.Redis, settings: Settings) -> None:
    """Make writes acknowledged through `client` wait for the replicas `settings` ask."""
    policy = Replication.of(settings)
    if policy.replicas > 0:
        _POLICIES[client] = policy


def policy_of(client: redis.Redis | aioredis.Redis) -> Replication | None:
    """The replication wait of `client`, None when it acknowledges at once."""
    return _POLICIES.get(client)


async def replicated(client: aioredis.Redis) -> None:
    """Return once the replicas of `client`'s policy (`attach`) have every write so far."""
    policy = _POLICIES.get(client)
    if policy is not None:
        await policy.wait(client)


async def run_replicated(
    client: aioredis.Redis, script: LuaScript, numkeys: int, *args: Any
) -> Any:
    """`script.run`, answered once the replicas of `client`'s policy have its writes."""
    policy = _POLICIES.get(client)
    if policy is None:
        return await script.run(client, numkeys, *args)
    return await policy.run(client, script, numkeys, *args)
