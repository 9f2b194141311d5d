"""Helpers for the HTTP API tests: a served replica, a client, Server-Sent Events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

TOKEN = "test-token-3c9f0d"


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def sse(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """(event name, data) per Server-Sent Event of a streamed response."""
    name, data = "message", []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith(":"):
            continue  # a comment: keep-alive
        elif line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").strip())


async def collect_until_answer(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    seen = []
    async for name, data in sse(response):
        seen.append((name, data))
        if name in ("answer", "error"):
            break
    return seen
