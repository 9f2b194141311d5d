"""Lua scripts run by SHA1, and by their text when the server does not know them yet."""

from __future__ import annotations

import fakeredis
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.support import counted_round_trips
from toolfleet.shared.scripts import LuaScript

SCRIPT = LuaScript("return redis.call('incrby', KEYS[1], ARGV[1])")


def test_a_script_runs_once_whether_or_not_the_server_knew_it() -> None:
    client = fakeredis.FakeRedis()
    assert SCRIPT.run_sync(client, 1, "n", 2) == 2  # NOSCRIPT first: sent as text, once
    assert client.script_exists(SCRIPT.sha) == [True]
    assert SCRIPT.run_sync(client, 1, "n", 3) == 5  # by SHA1 now
    client.script_flush()  # what a Redis restart does
    assert SCRIPT.run_sync(client, 1, "n", 1) == 6


async def test_the_asyncio_form_does_the_same() -> None:
    client = fakeredis.FakeAsyncRedis()
    assert await SCRIPT.run(client, 1, "n", 4) == 4
    assert await SCRIPT.run(client, 1, "n", 4) == 8
    with pytest.raises(Exception, match="nope"):  # a script error is not swallowed
        await LuaScript("return redis.call('nope')").run(client, 0)


def test_many_runs_go_in_one_pipeline_each_reply_or_error_in_its_place() -> None:
    client = fakeredis.FakeRedis()
    client.set("text", "not a number")
    round_trips = counted_round_trips(client)
    replies = SCRIPT.run_all(client, [(1, "a", 2), (1, "text", 1), (1, "a", 3)])
    assert replies[0] == 2 and replies[2] == 5  # NOSCRIPT first: each sent once by its text
    assert isinstance(replies[1], redis.ResponseError)  # only its own run failed
    assert len(round_trips) == 2  # by SHA1, then the unknown ones by text
    client.script_flush()  # what a Redis restart does between two batches (one more)
    assert SCRIPT.run_all(client, [(1, "a", 1)]) == [6]
    assert SCRIPT.run_all(client, [(1, "a", 1), (1, "b", 1)]) == [7, 1]
    assert len(round_trips) == 6  # known now: one round trip for the last batch


def test_a_lost_connection_raises_for_the_whole_batch() -> None:
    # Nothing listens on port 1; no retries, so the error comes at once.
    down = redis.Redis(port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    with pytest.raises(redis.ConnectionError):
        SCRIPT.run_all(down, [(1, "a", 1), (1, "b", 1)])
