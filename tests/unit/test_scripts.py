"""Lua scripts run by SHA1, and by their text when the server does not know them yet."""

from __future__ import annotations

import fakeredis
import pytest

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
