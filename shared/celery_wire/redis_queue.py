"""Task messages taken from kombu's Redis lists, acknowledged and put back, in batches,
with kombu's own bookkeeping: a message taken here is one kombu's sweep and consumer
know, and the other way round.

A message taken is recorded in kombu's unacknowledged hash and index in the same script
call that pops it, so no crash can lose it between the two (kombu's own consumer pops
and records in two round trips). The broker's sweep (kombu's `restore_visible`, which
every worker runs) puts the messages of a dead worker back on their queue once the
visibility timeout has passed since they were taken.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from toolfleet.shared.celery_wire.layout import UNACKED_INDEX_KEY, UNACKED_KEY, priority_lists
from toolfleet.shared.scripts import LuaScript

# Each popped message is recorded as kombu's QoS.append does: [message, exchange,
# routing key] under its delivery tag, scored by when it was taken; the tags are returned
# beside the messages (the caller acknowledges one it cannot read by the tag recorded
# here: Lua's JSON reader takes some text Python's does not). A message that is not
# kombu's JSON is returned apart, never recorded: the caller logs and drops it.
_TAKE = LuaScript(
    """
local taken, bad, tags = {}, {}, {}
local limit = tonumber(ARGV[1])
for i = 3, #KEYS do
  while #taken + #bad < limit do
    local raw = redis.call('RPOP', KEYS[i])
    if not raw then break end
    local ok, message = pcall(cjson.decode, raw)
    local tag = ok and type(message) == 'table' and type(message.properties) == 'table'
      and message.properties.delivery_tag
    if type(tag) ~= 'string' then
      bad[#bad + 1] = raw
    else
      local info = message.properties.delivery_info
      if type(info) ~= 'table' then info = {} end
      local exchange = info.exchange or ''
      local routing_key = info.routing_key or ''
      redis.call('HSET', KEYS[1], tag,
        '[' .. raw .. ',' .. cjson.encode(exchange) .. ',' .. cjson.encode(routing_key) .. ']')
      redis.call('ZADD', KEYS[2], ARGV[2], tag)
      taken[#taken + 1] = raw
      tags[#tags + 1] = tag
    end
  end
end
return {taken, bad, tags}
"""
)


@dataclass(frozen=True)
class Batch:
    """What one take got: messages to run, the tags they were recorded under (in the
    same order), and raw values that were not messages."""

    messages: list[bytes]
    malformed: list[bytes]
    tags: list[str]


class BrokerQueue:
    """One queue's messages, taken in batches into kombu's unacknowledged set."""

    def __init__(self, client: redis.Redis, queue: str) -> None:
        self._client = client
        self.queue = queue
        self._keys = [UNACKED_KEY, UNACKED_INDEX_KEY, *priority_lists(queue)]

    def take(self, limit: int) -> Batch:
        """Up to `limit` messages, oldest first, each recorded as unacknowledged now."""
        keys = self._keys
        taken, bad, tags = _TAKE.run_sync(self._client, len(keys), *keys, limit, time.time())
        recorded = [t.decode() if isinstance(t, bytes) else str(t) for t in tags]
        return Batch(list(taken), list(bad), recorded)

    def wait(self, timeout_s: int, on: redis.Redis) -> bool:
        """Block until the queue has a message, or `timeout_s` passes; whether it has one.
        `on`: the client to block (one whose wait can be cut short, not the queue's own,
        which takes and acknowledges meanwhile).

        BLMOVE from the list's tail to its tail leaves the message where it was (Redis
        has no blocking wait that does not pop), so the take that follows records it."""
        first = self._keys[2]  # priority 0's list, where every call toolfleet sends waits
        moved = on.blmove(first, first, timeout_s, "RIGHT", "RIGHT")
        return moved is not None


def ack(client: redis.Redis, tags: Sequence[str]) -> None:
    """Acknowledge the taken messages `tags` (whoever took them: this module or kombu's
    consumer): remove them from kombu's unacknowledged hash and index, in one round trip."""
    pipe = client.pipeline(transaction=True)
    pipe.zrem(UNACKED_INDEX_KEY, *tags)
    pipe.hdel(UNACKED_KEY, *tags)
    pipe.execute()


def keep_taken(client: redis.Redis, tags: Sequence[str]) -> None:
    """Score the taken messages `tags` as taken now, those still unacknowledged (XX):
    kombu's sweep puts back only messages scored past the visibility timeout."""
    if tags:
        now = time.time()
        client.zadd(UNACKED_INDEX_KEY, dict.fromkeys(tags, now), xx=True)


def restore_visible(connection: Any) -> None:
    """kombu's sweep, on the kombu Redis `connection` (a Celery app's
    `connection_for_write()`): every taken message past the visibility timeout goes back
    to its queue, under kombu's lock. One channel is one thread's at a time."""
    # Every message past the timeout (num=None), on each call (interval=1).
    _qos(connection).restore_visible(num=None, interval=1)


def restore(connection: Any, tag: str) -> None:
    """Put the taken message `tag` back on its queue, at the end taken next, as kombu's
    sweep puts back the messages of a dead worker."""
    _qos(connection).restore_by_tag(tag)


def _qos(connection: Any) -> Any:
    channel: Any = connection.default_channel  # kombu's Redis channel
    return channel.qos
