"""Commands packed by hiredis and a synchronous client's batch sent whole (shared/resp.py):
replies in order, an error reply in its place, a lost connection retried as the client
retries, then raised, and a connection that may hold unread replies never reused."""

from __future__ import annotations

from typing import Any

import fakeredis
import pytest
import redis
from redis.backoff import AbstractBackoff, NoBackoff
from redis.retry import Retry

from toolfleet.shared.resp import pack, send_all


def test_replies_come_in_order_each_error_in_its_place_as_the_connection_parses_them() -> None:
    client = fakeredis.FakeRedis()
    replies = send_all(
        client,
        [
            ("SET", "a", "1"),
            ("INCR", "a"),
            ("LPUSH", "a", "x"),
            ("HSET", "h", "f", "v"),
            ("GET", "a"),
        ],
    )
    assert replies[0] == b"OK"  # no response callbacks: SET's reply as sent
    assert replies[1] == 2 and replies[3] == 1 and replies[4] == b"2"
    assert isinstance(replies[2], redis.ResponseError) and "WRONGTYPE" in str(replies[2])


def test_no_commands_take_no_connection() -> None:
    client = fakeredis.FakeRedis()
    taken: list[int] = []
    get_connection = client.connection_pool.get_connection
    client.connection_pool.get_connection = lambda *a, **k: taken.append(1) or get_connection()  # type: ignore[method-assign]
    assert send_all(client, []) == []
    assert taken == []


def test_a_server_that_is_down_raises_a_connection_error_and_the_connection_goes_back() -> None:
    # Nothing listens on port 1; no retries, so the error comes at once.
    down = redis.Redis(port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    with pytest.raises(redis.ConnectionError):
        send_all(down, [("PING",)])
    pool: Any = down.connection_pool
    assert pool._in_use_connections == set()  # released, not leaked


class _Reconnects(AbstractBackoff):
    """A backoff that brings the fake server back before the retry."""

    def __init__(self, server: fakeredis.FakeServer) -> None:
        self.server = server

    def reset(self) -> None:
        pass

    def compute(self, failures: int) -> float:
        self.server.connected = True
        return 0.0


def test_a_lost_connection_is_retried_as_the_client_retries_with_every_command() -> None:
    server = fakeredis.FakeServer()
    client = fakeredis.FakeRedis(server=server)
    client.set("n", 0)
    connection: Any = client.connection_pool.get_connection()  # the one send_all takes
    connection.retry = Retry(_Reconnects(server), 1)  # as a client with retries makes it
    client.connection_pool.release(connection)
    server.connected = False
    assert send_all(client, [("INCR", "n"), ("INCR", "n")]) == [1, 2]
    assert client.get("n") == b"2"


def test_a_failure_while_reading_drops_the_connection_so_no_reply_is_read_late() -> None:
    client = fakeredis.FakeRedis()
    connection: Any = client.connection_pool.get_connection()
    client.connection_pool.release(connection)
    read = connection.read_response
    reads: list[int] = []

    def fails_once(*args: Any, **kwargs: Any) -> Any:
        reads.append(1)
        if len(reads) == 1:
            raise ValueError("a bug while parsing")
        return read(*args, **kwargs)

    connection.read_response = fails_once
    disconnected: list[int] = []
    disconnect = connection.disconnect
    connection.disconnect = lambda *a, **k: disconnected.append(1) or disconnect(*a, **k)
    with pytest.raises(ValueError, match="a bug while parsing"):
        send_all(client, [("SET", "a", "1"), ("GET", "a")])
    assert disconnected  # the second reply was never read: not left for the next caller
    assert send_all(client, [("GET", "a")]) == [b"1"]


def test_a_value_hiredis_cannot_pack_is_refused_naming_the_command() -> None:
    assert pack([("SET", "k", bytearray(b"v"))]) == pack([("SET", "k", b"v")])
    assert pack([("CONFIG GET", "maxmemory")]) == pack([("CONFIG", "GET", "maxmemory")])
    with pytest.raises(redis.DataError, match="SET"):
        pack([("set", "k", object())])
