"""The fault tests' own redis-server: a port taken before its first start is given up
for another; a restart keeps its port."""

from __future__ import annotations

import socket

import pytest
import redis

from tests.faults.servers import ExitedAtStart, RedisServer


def test_a_first_start_on_a_taken_port_moves_to_another() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        server = RedisServer(appendonly=False)
        server.port = busy  # bound by another process since it was chosen
        with server:
            assert server.port != busy
            assert redis.Redis.from_url(server.url()).ping()


def test_a_restart_keeps_its_port_and_says_when_it_is_taken() -> None:
    server = RedisServer(appendonly=False)
    with server:
        port = server.port
        server.stop()
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", port))
            taken.listen()
            with pytest.raises(ExitedAtStart):
                server.start()
        server.start()
        assert server.port == port and redis.Redis.from_url(server.url()).ping()
