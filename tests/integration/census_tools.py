"""Tools of the `census` pools that hold their worker slot until the test releases them."""

from __future__ import annotations

import redis
import redis.asyncio as aioredis

from toolfleet.shared.tools import tool


@tool(pool="census")
def hold(url: str, key: str, timeout_s: float) -> str:
    """Waits until an item is pushed on the Redis list `key` (at most `timeout_s`)."""
    with redis.Redis.from_url(url) as client:
        return "released" if client.blpop([key], timeout=timeout_s) else "timed out"


@tool(pool="census_io", kind="io")
async def hold_io(url: str, key: str, timeout_s: float) -> str:
    """`hold` as a coroutine, on an io worker's call loop."""
    client = aioredis.Redis.from_url(url)
    try:
        return "released" if await client.blpop([key], timeout=timeout_s) else "timed out"
    finally:
        await client.aclose()
