"""The outbox of task messages bound for RabbitMQ, and the relay that empties it.

With the tool queues on RabbitMQ (`TOOLFLEET_BROKER_URL=amqp://...`) a turn's task
messages cannot be sent in the fenced write that stores the turn, as they are on Redis.
That write pushes them onto the app's outbox list in Redis instead (the same messages,
kombu's Redis-transport JSON); a relay in every replica moves them to their queues,
oldest first, with publisher confirms, and removes them from the outbox only once the
broker confirmed them. One replica relays at a time, under a lease. A relay that dies
between the confirm and the removal leaves them to be published again: workers drop a
message published twice (workers/deliveries.py, the claim of a first delivery) and never
start a closed call (docs/design.md, "The invariant").
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any

import amqp
import redis.asyncio as aioredis
from kombu import Connection

from toolfleet.shared.celery_config import QUORUM_QUEUE_ARGUMENTS
from toolfleet.shared.keys import Keys
from toolfleet.shared.scripts import LuaScript

log = logging.getLogger(__name__)

# Messages read, published and removed per step: one removal per this many confirms.
RELAY_BATCH = 500
# How long a relay waits for new messages before it looks again without being woken
# (messages another replica wrote, or a lease another replica let go).
RELAY_POLL_S = 0.05
# How long the relay waits for RabbitMQ's next confirm before it gives the batch up
# (and publishes it again on a new connection).
CONFIRM_TIMEOUT_S = 10.0
# The relay's lease: another replica's relay takes over this long after one dies.
RELAY_LEASE_MS = 3000
# After a broker error the relay tries again this long later, then twice as long, up to
# RELAY_BACKOFF_MAX_S; the messages wait in the outbox meanwhile.
RELAY_BACKOFF_S = 0.1
RELAY_BACKOFF_MAX_S = 2.0

# Remove the `n` oldest messages (the list's tail: the orchestrator pushes on the left),
# only while this relay still holds the lease it read them under.
_REMOVE = LuaScript(
    """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('LTRIM', KEYS[1], 0, -1 - tonumber(ARGV[2]))
return 1
"""
)
# Take or keep the lease (compare-and-renew).
_LEASE = LuaScript(
    """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""
)
_RELEASE = LuaScript(
    """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
)


def outbox_key(keys: Keys) -> str:
    """The list of task messages written but not yet confirmed by RabbitMQ."""
    return f"{keys.prefix}:outbox"


def relay_lease_key(keys: Keys) -> str:
    """The lease of the one relay that empties the outbox."""
    return f"{keys.prefix}:outbox:relay"


def amqp_message(raw: bytes | str) -> tuple[str, dict[str, Any]]:
    """The queue of an outbox message and kombu's `Producer.publish` arguments for it."""
    message = json.loads(raw)
    properties = dict(message["properties"])
    queue = properties.pop("delivery_info")["routing_key"]
    body = message["body"]
    if properties.pop("body_encoding", None) == "base64":
        body = base64.b64decode(body)
    properties.pop("delivery_tag", None)
    return queue, {
        "body": body,
        "headers": message["headers"],
        "content_type": message["content-type"],
        "content_encoding": message["content-encoding"],
        "delivery_mode": properties.pop("delivery_mode", 2),
        "priority": properties.pop("priority", 0),
        "correlation_id": properties.get("correlation_id"),
        "reply_to": properties.get("reply_to"),
    }


class AmqpPublisher:
    """Publishes outbox messages to RabbitMQ, every one confirmed before `publish`
    returns. A batch is published at once and its confirms awaited together (one broker
    commit for many messages, not one round trip each). Synchronous (py-amqp): the relay
    runs it on a thread."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._connection: Connection | None = None
        self._channel: Any = None  # py-amqp's Channel, in confirm mode
        self._declared: set[str] = set()
        self._published = 0  # delivery tags given on this channel (confirm mode counts)
        self._confirmed = 0  # every tag up to this one is confirmed
        self._refused: list[int] = []

    def publish(self, raws: Sequence[bytes | str]) -> None:
        """Publish `raws` in order; returns once the broker confirmed every one. Raises
        on a connection error, a refusal (nack) or no confirm within CONFIRM_TIMEOUT_S
        (the connection is dropped: the next call opens a new one)."""
        try:
            connection, channel = self._connect()
            for raw in raws:
                queue, arguments = amqp_message(raw)
                if queue not in self._declared:
                    channel.queue_declare(
                        queue, durable=True, auto_delete=False, arguments=QUORUM_QUEUE_ARGUMENTS
                    )
                    self._declared.add(queue)
                body = arguments.pop("body")
                headers = arguments.pop("headers")
                message = amqp.Message(body, application_headers=headers, **arguments)
                channel.basic_publish(message, exchange="", routing_key=queue)
                self._published += 1
            while self._confirmed < self._published:
                if self._refused:
                    raise ConnectionError(f"RabbitMQ refused messages {self._refused[:5]}")
                connection.drain_events(timeout=CONFIRM_TIMEOUT_S)
            if self._refused:
                raise ConnectionError(f"RabbitMQ refused messages {self._refused[:5]}")
        except Exception:
            self.close()
            raise

    def _confirm(self, tag: int, multiple: bool) -> None:
        # Confirms of one channel come in order; `multiple` covers every tag up to it.
        self._confirmed = max(self._confirmed, tag)

    def _refuse(self, tag: int, multiple: bool) -> None:
        self._refused.append(tag)

    def _connect(self) -> tuple[Connection, Any]:
        if self._connection is None or self._channel is None:
            connection = Connection(self._url)
            connection.ensure_connection(max_retries=1)
            channel: Any = connection.channel()
            channel.events["basic_ack"].add(self._confirm)
            channel.events["basic_nack"].add(self._refuse)
            channel.confirm_select()
            self._connection, self._channel = connection, channel
            self._declared.clear()
            self._published = self._confirmed = 0
            self._refused = []
        return self._connection, self._channel

    def close(self) -> None:
        """Close the connection, if any."""
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.release()


class OutboxRelay:
    """Moves the outbox's messages to RabbitMQ while its replica runs (`start`/`stop`).
    `wake` after a write to the outbox: this replica's relay takes it at once."""

    def __init__(self, client: aioredis.Redis, keys: Keys, broker_url: str) -> None:
        self._redis = client
        self._outbox = outbox_key(keys)
        self._lease = relay_lease_key(keys)
        self._publisher = AmqpPublisher(broker_url)
        self._woken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._token: str | None = None  # new with each lease taken

    def wake(self) -> None:
        """New messages are in the outbox."""
        self._woken.set()

    def start(self) -> None:
        """Start relaying (on the running event loop)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="outbox-relay")

    async def stop(self) -> None:
        """Stop relaying; give the lease back so another replica's relay takes over."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._token is not None:
            with contextlib.suppress(Exception):
                await _RELEASE.run(self._redis, 1, self._lease, self._token)
        await asyncio.to_thread(self._publisher.close)

    async def _run(self) -> None:
        backoff = RELAY_BACKOFF_S
        while True:
            try:
                moved = await self.relay_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning(
                    "outbox relay: %s: %s; the messages stay in the outbox, retrying in %.1fs",
                    type(exc).__name__,
                    exc,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(2 * backoff, RELAY_BACKOFF_MAX_S)
                continue
            backoff = RELAY_BACKOFF_S
            if moved == 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._woken.wait(), RELAY_POLL_S)
                self._woken.clear()

    async def relay_once(self) -> int:
        """One step: under the lease, publish the oldest messages (up to RELAY_BATCH) and
        remove them once confirmed. How many moved (0: none waiting, or no lease)."""
        token = await self._hold_lease()
        if token is None:
            return 0
        raws = await self._redis.lrange(self._outbox, -RELAY_BATCH, -1)
        if not raws:
            return 0
        oldest_first = list(reversed(raws))
        await asyncio.to_thread(self._publisher.publish, oldest_first)
        removed = await _REMOVE.run(self._redis, 2, self._outbox, self._lease, token, len(raws))
        if not removed:  # lost the lease meanwhile: the next holder publishes them again
            log.warning(
                "outbox relay lost its lease: %d messages may be published twice", len(raws)
            )
        return len(raws)

    async def _hold_lease(self) -> str | None:
        token = self._token or uuid.uuid4().hex
        held = await _LEASE.run(self._redis, 1, self._lease, token, RELAY_LEASE_MS)
        self._token = token if held else None
        return self._token
