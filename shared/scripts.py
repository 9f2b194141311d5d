"""Lua scripts run by their SHA1 (EVALSHA): the text travels, and Redis hashes it, only
when the server does not know it yet (a restart flushes the script cache).

A NOSCRIPT reply means nothing ran, so sending the text then (EVAL) cannot apply a
script twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from toolfleet.shared.resp import send_all


class LuaScript:
    """One script, runnable on a sync or an asyncio client."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()

    async def run(self, client: aioredis.Redis, numkeys: int, *args: Any) -> Any:
        """EVALSHA, or EVAL when the server does not know the script yet.

        Sent as plain commands: redis-py's `evalsha` adds two decorators and a copy of
        the keys (for cluster routing) to every call, and the session writes' scripts
        carry dozens of arguments on every turn."""
        send = client.execute_command  # redis-py leaves it untyped
        try:
            return await send("EVALSHA", self.sha, numkeys, *args)  # type: ignore[no-untyped-call]
        except NoScriptError:
            return await send("EVAL", self.text, numkeys, *args)  # type: ignore[no-untyped-call]

    def run_sync(self, client: redis.Redis, numkeys: int, *args: Any) -> Any:
        """`run` for a synchronous client."""
        send = client.execute_command
        try:
            return send("EVALSHA", self.sha, numkeys, *args)  # type: ignore[no-untyped-call]
        except NoScriptError:
            return send("EVAL", self.text, numkeys, *args)  # type: ignore[no-untyped-call]

    def run_all(
        self,
        client: redis.Redis,
        calls: Sequence[Sequence[Any]],
        send: Callable[[list[tuple[Any, ...]]], list[Any]] | None = None,
    ) -> list[Any]:
        """The replies of many runs (each `(numkeys, *args)`), sent in one pipeline; a run
        that failed has its error in its place, not raised. A connection error is raised:
        then some may have run and others not, as with any command whose reply is lost.
        `send` sends each pipeline (`send_all` on `client` by default)."""
        if send is None:
            send = partial(send_all, client)
        replies = send([("EVALSHA", self.sha, *args) for args in calls])
        unknown = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if unknown:  # nothing of those ran: send them again with the text
            again = send([("EVAL", self.text, *calls[i]) for i in unknown])
            for i, reply in zip(unknown, again, strict=True):
                replies[i] = reply
        return replies


# A Lua function for scripts that run a batch of items, each in a pcall of its own: the
# item's reply, or its own error as an error reply (one item that fails fails no other).
LUA_ITEM_REPLY = """
local function item_reply(ok, reply)
  if ok then return reply end
  return redis.error_reply(type(reply) == 'table' and reply.err or tostring(reply))
end
"""


def run_items(
    send: Callable[[list[list[Any]]], list[Any]],
    common: Sequence[Any],
    items: Sequence[tuple[Sequence[Any], Sequence[Any]]],
    per_run: int,
) -> list[Any]:
    """Each item's reply from a script that takes a batch of items: the items' keys one
    after another, then the `common` arguments and the items' own (`(keys, args)` each),
    `per_run` items to a run, every run sent at once by `send` (a list of runs, each
    `(numkeys, *args)`, to a list of replies). An item whose run failed as a whole gets
    that run's error."""
    runs: list[list[Any]] = []
    for start in range(0, len(items), per_run):
        keys: list[Any] = []
        args: list[Any] = list(common)
        for item_keys, item_args in items[start : start + per_run]:
            keys += item_keys
            args += item_args
        runs.append([len(keys), *keys, *args])
    replies: list[Any] = []
    for start, reply in zip(range(0, len(items), per_run), send(runs), strict=True):
        size = min(per_run, len(items) - start)
        replies += [reply] * size if isinstance(reply, Exception) else reply
    return replies


def only_reply(replies: Sequence[Any]) -> Any:
    """The reply of a batch script run for one item; its error raised, as a command's."""
    (reply,) = replies
    if isinstance(reply, Exception):
        raise reply
    return reply
