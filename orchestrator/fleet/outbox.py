"""The outbox of task messages bound for RabbitMQ, and the relay that empties it.

With the tool queues on RabbitMQ (`TOOLFLEET_BROKER_URL=amqp://...`) a turn's task
messages cannot be sent in the fenced write that stores the turn, as they are on Redis.
That write pushes them onto the app's outbox list in Redis instead (the same messages,
kombu's Redis-transport JSON); a relay in every replica moves them to their queues,
oldest first, with publisher confirms, and removes them from the outbox only once the
broker confirmed them. One replica relays at a time, under a lease. A relay that dies
between the confirm and the removal leaves them to be published again: workers drop a
message published twice (workers/deliveries.py, the claim of the delivery that runs)
and never start a closed call (docs/design.md, "The invariant").

A batch that fails is published again one message at a time: a message RabbitMQ refuses
(over its max_message_size, or bound for a queue declared otherwise) would fail every
try of its batch, and hold up every pool's calls behind it. Its call is answered with an
error instead (orchestrator/fleet/refusals.py), and the others go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
import uuid
from collections.abc import Sequence

import redis.asyncio as aioredis

from toolfleet.orchestrator.fleet.refusals import RefusalAnswers
from toolfleet.shared.celery_wire.rabbitmq import AmqpPublisher
from toolfleet.shared.keys import Keys
from toolfleet.shared.scripts import LuaScript

log = logging.getLogger(__name__)

# Messages read, published and removed per step: one removal per this many confirms.
RELAY_BATCH = 500
# How long a relay waits for new messages before it looks again without being woken
# (messages another replica wrote, or a lease another replica let go).
RELAY_POLL_S = 0.05
# The relay's lease: another replica's relay takes over this long after one dies.
RELAY_LEASE_MS = 3000
# After a broker error the relay tries again this long later, then twice as long, up to
# RELAY_BACKOFF_MAX_S; the messages wait in the outbox meanwhile.
RELAY_BACKOFF_S = 0.1
RELAY_BACKOFF_MAX_S = 2.0
# How often an idle relay keeps its connection alive, per heartbeat timeout: it sends a
# heartbeat at half the timeout, RabbitMQ closes a connection silent for 2 timeouts.
KEEP_ALIVES_PER_TIMEOUT = 4

# Remove the `n` oldest messages (the list's tail: the orchestrator pushes on the left),
# only while this relay still holds the lease it read them under, and only while they are
# there: the newest of them (its SHA1) is still `n` from the end. Sent again because its
# reply was lost, the removal finds the messages written since there instead and leaves
# them (trimming `n` more would drop them unpublished).
_REMOVE = LuaScript(
    """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[2])
local newest = redis.call('LINDEX', KEYS[1], -n)
if newest and redis.sha1hex(newest) == ARGV[3] then
  redis.call('LTRIM', KEYS[1], 0, -1 - n)
end
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


def _sha1(raw: bytes) -> str:
    """What the removal script compares (redis.sha1hex): not the message itself again."""
    return hashlib.sha1(raw).hexdigest()


def outbox_key(keys: Keys) -> str:
    """The list of task messages written but not yet confirmed by RabbitMQ."""
    return f"{keys.prefix}:outbox"


def relay_lease_key(keys: Keys) -> str:
    """The lease of the one relay that empties the outbox."""
    return f"{keys.prefix}:outbox:relay"


class OutboxRelay:
    """Moves the outbox's messages to RabbitMQ while its replica runs (`start`/`stop`).
    `wake` after a write to the outbox: this replica's relay takes it at once.
    `heartbeat_s`: the AMQP heartbeat timeout of its connection (0: none); while idle
    it keeps the connection alive, so that RabbitMQ closes it only once this replica
    went silent, and the relay finds a dead connection before its next batch.
    `answers`: answers the call of a message RabbitMQ refuses (None: it is logged and
    dropped, and its call times out)."""

    def __init__(
        self,
        client: aioredis.Redis,
        keys: Keys,
        broker_url: str,
        heartbeat_s: int = 0,
        answers: RefusalAnswers | None = None,
    ) -> None:
        self._redis = client
        self._answers = answers
        self._outbox = outbox_key(keys)
        self._lease = relay_lease_key(keys)
        self._publisher = AmqpPublisher(broker_url, heartbeat_s=heartbeat_s)
        self._keep_alive_s = heartbeat_s / KEEP_ALIVES_PER_TIMEOUT if heartbeat_s else None
        self._keep_alive_at = 0.0  # monotonic time of the next keep-alive
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
                await self._keep_alive()

    async def _keep_alive(self) -> None:
        """`AmqpPublisher.keep_alive`, KEEP_ALIVES_PER_TIMEOUT times per heartbeat timeout
        (batches published meanwhile are traffic enough)."""
        if self._keep_alive_s is None or time.monotonic() < self._keep_alive_at:
            return
        self._keep_alive_at = time.monotonic() + self._keep_alive_s
        await asyncio.to_thread(self._publisher.keep_alive)

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
        try:
            await asyncio.to_thread(self._publisher.publish, oldest_first)
        except Exception as exc:
            log.warning(
                "outbox relay: a batch of %d failed (%s: %s); publishing it one at a time",
                len(raws), type(exc).__name__, exc,
            )  # fmt: skip
            await self._publish_each(oldest_first)
        newest = raws[0] if isinstance(raws[0], bytes) else raws[0].encode()
        removed = await _REMOVE.run(
            self._redis, 2, self._outbox, self._lease, token, len(raws), _sha1(newest)
        )
        if not removed:  # lost the lease meanwhile: the next holder publishes them again
            log.warning(
                "outbox relay lost its lease: %d messages may be published twice", len(raws)
            )
        return len(raws)

    async def _publish_each(self, raws: Sequence[bytes | str]) -> None:
        """Publish `raws` one at a time and answer the call of each one RabbitMQ refuses.
        Raises where the broker is away (the batch waits in the outbox), or Redis where
        an answer was not posted (the batch is published again)."""
        refusals = await asyncio.to_thread(self._publisher.publish_each, raws)
        for raw, refusal in zip(raws, refusals, strict=True):
            if refusal is None:
                continue
            if self._answers is None:
                log.error("outbox relay: RabbitMQ refused a message, dropped: %s", refusal)
                continue
            await asyncio.to_thread(self._answers.answer, raw, refusal)

    async def _hold_lease(self) -> str | None:
        token = self._token or uuid.uuid4().hex
        held = await _LEASE.run(self._redis, 1, self._lease, token, RELAY_LEASE_MS)
        self._token = token if held else None
        return self._token
