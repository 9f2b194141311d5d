"""Lua scripts run by their SHA1 (EVALSHA): the text travels, and Redis hashes it, only
when the server does not know it yet (a restart flushes the script cache).

A NOSCRIPT reply means nothing ran, so sending the text then (EVAL) cannot apply a
script twice.
"""

from __future__ import annotations

import hashlib
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError


class LuaScript:
    """One script, runnable on a sync or an asyncio client."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()

    async def run(self, client: aioredis.Redis, numkeys: int, *args: Any) -> Any:
        """EVALSHA, or EVAL when the server does not know the script yet."""
        try:
            return await client.evalsha(self.sha, numkeys, *args)
        except NoScriptError:
            return await client.eval(self.text, numkeys, *args)

    def run_sync(self, client: redis.Redis, numkeys: int, *args: Any) -> Any:
        """`run` for a synchronous client."""
        try:
            return client.evalsha(self.sha, numkeys, *args)
        except NoScriptError:
            return client.eval(self.text, numkeys, *args)
