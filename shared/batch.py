"""Redis writes collected for one atomic step, run as MULTI/EXEC or inside a script.

Stores stage their writes on a WriteBatch instead of a client pipeline, so that the
same staged writes can be applied plainly (a transaction) or fenced: only while the
writer still holds a session's lease, checked by Redis in the same step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import redis
import redis.asyncio as aioredis

Arg = str | bytes | int | float


def together(*stages: Stage) -> Stage:
    """One stage that stages each of `stages` on the batch, in order."""

    def stage(batch: WriteBatch) -> None:
        for each in stages:
            each(batch)

    return stage


class WriteBatch:
    """An ordered list of Redis write commands (the subset the stores use), and the keys
    whose time to live the step restarts once its commands have run."""

    def __init__(self) -> None:
        self.commands: list[tuple[Arg, ...]] = []
        self.ttls: dict[str, int] = {}  # key -> seconds, applied after the commands

    def __len__(self) -> int:
        return len(self.commands)

    def add(self, *command: Arg) -> None:
        """Append any command, e.g. `add("XACK", stream, group, entry_id)`."""
        self.commands.append(command)

    def rpush(self, key: str, *values: Arg) -> None:
        """Append values to a list."""
        self.add("RPUSH", key, *values)

    def lpush(self, key: str, *values: Arg) -> None:
        """Prepend values to a list (Celery's Redis queues are consumed from the right)."""
        self.add("LPUSH", key, *values)

    def hset(self, key: str, field: Arg | None = None, value: Arg | None = None, *,
             mapping: Mapping[str, Arg] | None = None) -> None:  # fmt: skip
        """Set one field, or every field of `mapping`, of a hash."""
        pairs: list[Arg] = [] if field is None or value is None else [field, value]
        for name, item in (mapping or {}).items():
            pairs += [name, item]
        if pairs:
            self.add("HSET", key, *pairs)

    def hdel(self, key: str, *fields: Arg) -> None:
        """Remove fields of a hash."""
        self.add("HDEL", key, *fields)

    def sadd(self, key: str, *members: Arg) -> None:
        """Add members to a set."""
        self.add("SADD", key, *members)

    def srem(self, key: str, *members: Arg) -> None:
        """Remove members of a set."""
        self.add("SREM", key, *members)

    def zadd(self, key: str, scores: Mapping[str, float]) -> None:
        """Add members to a sorted set (or change their scores)."""
        pairs: list[Arg] = []
        for member, score in scores.items():
            pairs += [score, member]
        if pairs:
            self.add("ZADD", key, *pairs)

    def zrem(self, key: str, *members: Arg) -> None:
        """Remove members of a sorted set."""
        self.add("ZREM", key, *members)

    def delete(self, *keys: str) -> None:
        """Delete keys."""
        self.add("DEL", *keys)

    def expire(self, key: str, seconds: int) -> None:
        """Give a key a time to live."""
        self.add("EXPIRE", key, seconds)

    def refresh_ttl(self, seconds: int, *keys: str) -> None:
        """Give keys a time to live once the commands have run (a key named twice, say by
        two appends of one step, once). Inside a fenced write these ride as the script's
        arguments, not as one EXPIRE command each (fewer arguments to pack)."""
        for key in keys:
            self.ttls[key] = seconds

    def set(self, key: str, value: Arg, *, ex: int | None = None) -> None:
        """Set a string key (with a time to live in seconds)."""
        self.add("SET", key, value, *(("EX", ex) if ex is not None else ()))

    def xtrim_minid(self, stream: str, minid: str) -> None:
        """Drop a stream's entries older than `minid` (exactly, not approximately)."""
        self.add("XTRIM", stream, "MINID", minid)

    def flat(self) -> list[Arg]:
        """The step as script arguments: the number of TTL refreshes and each as key and
        seconds, then each command as its length and its words."""
        out: list[Arg] = [len(self.ttls)]
        for key, seconds in self.ttls.items():
            out += [key, seconds]
        for command in self.commands:
            out += [len(command), *command]
        return out

    async def run(self, client: aioredis.Redis) -> list[Any]:
        """Apply the step in one MULTI/EXEC; the replies of its commands, in order."""
        if not self.commands and not self.ttls:
            return []
        pipe = client.pipeline(transaction=True)
        self._stage(pipe)
        return list(await pipe.execute())[: len(self.commands)]

    def run_sync(self, client: redis.Redis) -> list[Any]:
        """`run` on a synchronous client (workers, the CLI)."""
        if not self.commands and not self.ttls:
            return []
        pipe = client.pipeline(transaction=True)
        self._stage(pipe)
        return list(pipe.execute())[: len(self.commands)]

    def _stage(self, pipe: redis.client.Pipeline | aioredis.client.Pipeline) -> None:
        for command in self.commands:
            pipe.execute_command(*command)
        for key, seconds in self.ttls.items():
            pipe.execute_command("EXPIRE", key, seconds)


# Stages commands of its own on a batch another step runs (the writes that go with it).
Stage = Callable[[WriteBatch], None]
