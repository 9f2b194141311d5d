"""The broker side of the intake: kombu's Redis layout, taken and acked in batches.

A message taken is recorded in kombu's unacknowledged hash and index in the same script
call that pops it, so no crash can lose it between the two (kombu's own consumer pops
and records in two round trips). The broker's sweep (kombu's `restore_visible`, which
every intake runs) puts the messages of a dead worker back on their queue once the
visibility timeout has passed since they were taken.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import redis
from kombu.transport.redis import Channel

from toolfleet.shared.scripts import LuaScript

log = logging.getLogger(__name__)

# Each popped message is recorded as kombu's QoS.append does: [message, exchange,
# routing key] under its delivery tag, scored by when it was taken. A message that is
# not kombu's JSON is returned apart, never recorded: the caller logs and drops it.
_TAKE = LuaScript(
    """
local taken, bad = {}, {}
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
    end
  end
end
return {taken, bad}
"""
)


# BLMOVE, with which a taker waits for a message without popping it, came in Redis 6.2.
MIN_REDIS = (6, 2)


def supports_intake(client: redis.Redis) -> bool:
    """Whether the server has what the intake needs (Redis 6.2 or later, or Valkey)."""
    version = str(client.info("server").get("redis_version", "0"))
    return tuple(int(part) for part in version.split(".")[:2]) >= MIN_REDIS


def priority_lists(queue: str) -> list[str]:
    """The Redis lists of `queue`, first taken first: kombu keeps messages with a priority
    on lists of their own (`queue\\x06\\x16N`), the plain one for priority 0."""
    return [f"{queue}{Channel.sep}{pri}" if pri else queue for pri in Channel.priority_steps]


@dataclass(frozen=True)
class Batch:
    """What one take got: messages to run, and raw values that were not messages."""

    messages: list[bytes]
    malformed: list[bytes]


class BrokerQueue:
    """One queue's messages, taken in batches into kombu's unacknowledged set."""

    def __init__(self, client: redis.Redis, queue: str) -> None:
        self._client = client
        self.queue = queue
        self._lists = priority_lists(queue)

    def take(self, limit: int) -> Batch:
        """Up to `limit` messages, oldest first, each recorded as unacknowledged now."""
        keys = [Channel.unacked_key, Channel.unacked_index_key, *self._lists]
        taken, bad = _TAKE.run_sync(self._client, len(keys), *keys, limit, time.time())
        return Batch(list(taken), list(bad))

    def wait(self, timeout_s: int) -> bool:
        """Block until the queue has a message, or `timeout_s` passes; whether it has one.

        BLMOVE from the list's tail to its tail leaves the message where it was (Redis
        has no blocking wait that does not pop), so the take that follows records it."""
        moved = self._client.blmove(self._lists[0], self._lists[0], timeout_s, "RIGHT", "RIGHT")
        return moved is not None


class Acks:
    """Acknowledgements, sent in batches: one round trip removes every tag acked since the
    last one from kombu's unacknowledged set."""

    def __init__(self, client: redis.Redis, period_s: float = 0.005) -> None:
        self._client = client
        self._period_s = period_s
        self._tags: list[str] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="toolfleet-acks", daemon=True)

    def start(self) -> None:
        """Start sending acks from a thread of its own."""
        self._thread.start()

    def ack(self, tag: str) -> None:
        """Acknowledge `tag` within about `period_s`."""
        with self._lock:
            self._tags.append(tag)
        self._wake.set()

    def flush(self) -> None:
        """Send the acks gathered so far."""
        with self._lock:
            tags, self._tags = self._tags, []
        if tags:
            send(self._client, tags)

    def stop(self) -> None:
        """Send what is left and stop."""
        self._stopping = True
        self._wake.set()
        self._thread.join()
        self.flush()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait()
            self._wake.clear()
            time.sleep(self._period_s)  # gather the acks of calls ending together
            try:
                self.flush()
            except redis.RedisError:
                # Unacked, the messages are redelivered after the visibility timeout and
                # found closed (answered): nothing runs twice.
                log.warning(
                    "acknowledging finished calls failed; they are redelivered after the "
                    "visibility timeout and found answered",
                    exc_info=True,
                )


def send(client: redis.Redis, tags: Sequence[str]) -> None:
    """Remove `tags` from kombu's unacknowledged hash and index, in one round trip."""
    pipe = client.pipeline(transaction=True)
    pipe.zrem(Channel.unacked_index_key, *tags)
    pipe.hdel(Channel.unacked_key, *tags)
    pipe.execute()
