"""How many times a replicated write waits (WAIT) for the replicas when the server does
not know its script (NOSCRIPT: a master just promoted, or restarted), on real
redis-servers: one that has no replica, as a master Sentinel just promoted, and one
whose replica is connected.

The first try (EVALSHA) and its wait go in one pipeline; the script ran nothing, so it
is sent again with its text. That write is new: it waits in turn, unless the first wait
fell short and the master still lists too few replicas, when it would only wait out the
timeout again."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aioredis

from tests.faults.servers import RedisServer
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.shared.replication import Replication
from toolfleet.shared.scripts import LuaScript

WAIT_MS = 300
BARRIER = "t:replicated"


def a_new_script() -> LuaScript:
    """A script no server has seen (its text, hence its SHA1, is new)."""
    return LuaScript(f"-- {uuid.uuid4().hex}\nreturn redis.call('SET', KEYS[1], ARGV[1])")


def waits(client: redis.Redis) -> int:
    """How many WAIT commands the server has run."""
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_wait", {}).get("calls", 0))


@pytest.fixture
def lone_master() -> Iterator[RedisServer]:
    """A master with no replica: what Sentinel has just promoted."""
    with RedisServer(appendonly=False) as server:
        yield server


@pytest.fixture
def master_and_replica() -> Iterator[tuple[RedisServer, RedisServer]]:
    with RedisServer(appendonly=False) as master:
        replica = RedisServer(["--replicaof", "127.0.0.1", str(master.port)], appendonly=False)
        with replica:
            client = redis.Redis(port=master.port)

            def replica_online() -> bool:
                role = client.execute_command("ROLE")
                return len(role[2]) == 1

            wait_for(replica_online, 10, "the replica to be in sync")
            client.close()
            yield master, replica


def test_a_script_unknown_to_a_master_without_replicas_waits_once(
    lone_master: RedisServer,
) -> None:
    """Given a master with no replica that does not know the script, a batch of writes
    waits out the timeout once, not once more for the retry with the script's text, and
    is applied."""
    client = redis.Redis(port=lone_master.port)
    replication = Replication(1, WAIT_MS, BARRIER)
    replies = replication.run_all_sync(client, a_new_script(), [(1, "t:a", "1"), (1, "t:b", "2")])
    assert replies == [b"OK", b"OK"]
    assert client.mget("t:a", "t:b") == [b"1", b"2"]
    assert waits(client) == 1
    # The next write finds too few replicas connected (ROLE) and waits no more.
    assert replication.run_sync(client, a_new_script(), 1, "t:c", "3") == b"OK"
    assert waits(client) == 1
    client.close()


async def test_an_async_script_unknown_to_a_master_without_replicas_waits_once(
    lone_master: RedisServer,
) -> None:
    """The same through an asyncio client (the orchestrator's session writes)."""
    client = aioredis.Redis(port=lone_master.port)
    replication = Replication(1, WAIT_MS, BARRIER)
    assert await replication.run(client, a_new_script(), 1, "t:a", "1") == b"OK"
    assert await client.get("t:a") == b"1"
    await client.aclose()
    stats = redis.Redis(port=lone_master.port)
    assert waits(stats) == 1
    stats.close()


def test_a_script_unknown_to_a_master_with_a_replica_is_acknowledged_once_replicated(
    master_and_replica: tuple[RedisServer, RedisServer],
) -> None:
    """Given a master whose replica is connected, the retry with the script's text (a new
    write) waits for the replica too: once acknowledged, the replica holds it."""
    master, replica = master_and_replica
    client = redis.Redis(port=master.port)
    on_replica = redis.Redis(port=replica.port)
    replication = Replication(1, 10_000, BARRIER)
    assert replication.run_sync(client, a_new_script(), 1, "t:a", "1") == b"OK"
    assert on_replica.get("t:a") == b"1"
    assert waits(client) == 2
    client.close()
    on_replica.close()
