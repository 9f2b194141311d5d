"""The broker a fault test's tool queues are on - Redis lists or RabbitMQ queues - and
what a test reads of it or sends through it, the same way on both.

A module marked ON_EACH_BROKER runs each test that takes the fault rig's `settings`
once per broker (tests/faults/conftest.py: the amqp runs on a vhost of the module's
own); REDIS_ONLY and AMQP_ONLY narrow one test to one broker.

On Redis (kombu's Redis transport) a message waits on a list, and once delivered sits
in kombu's unacked hash until acknowledged; a dead worker's unacknowledged messages go
back to the list by kombu's sweep, after the visibility timeout. On RabbitMQ the
orchestrator's messages wait in the Redis outbox until its relay publishes them; the
queue then holds them ready, and once delivered unacknowledged - and takes a dead
worker's unacknowledged messages back as soon as its connection drops. RabbitMQ shows
no message it delivered (and `rabbitmqctl`'s counts of a quorum queue lag by seconds),
so what is left of a call there is read once its workers are gone: a passive declare
counts the ready messages, at once.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
from kombu import Connection
from kombu.transport.redis import Channel

from tests.support import first_deliveries
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.local_workers import WorkerProcess
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.fleet.outbox import OutboxRelay, outbox_key
from toolfleet.shared.call_signing import CallSigner, call_fields
from toolfleet.shared.celery_config import broker_visibility_timeout_s, recovery_bound_s
from toolfleet.shared.celery_wire.parse import task_kwargs
from toolfleet.shared.celery_wire.rabbitmq import AmqpPublisher
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import Keys, queue_name
from toolfleet.shared.tools import FunctionTool
from toolfleet.workers.deliveries import claim_lease_s

BROKERS = ("redis", "amqp")
ON_EACH_BROKER = pytest.mark.brokers(*BROKERS)
REDIS_ONLY = pytest.mark.brokers("redis")
AMQP_ONLY = pytest.mark.brokers("amqp")

# RabbitMQ redelivers a dead worker's unacknowledged messages when it sees the worker's
# connection drop: at once for a killed process (its kernel closes the socket). This
# bounds that moment and the delivery to an idle worker, on a loaded machine.
AMQP_REDELIVERY_S = 1.0
# How long a passive declare may wait for RabbitMQ.
AMQP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Redelivery:
    """When a call held by a worker that died is delivered again: not before `earliest_s`
    after its first delivery, at most `latest_s` after the death."""

    earliest_s: float
    latest_s: float


@dataclass(frozen=True)
class Broker:
    """The tool queues of `settings`, read through `client` (Redis) or a passive declare."""

    settings: Settings
    client: redis.Redis

    @property
    def name(self) -> str:
        return "amqp" if self.settings.broker_is_amqp else "redis"

    def waiting(self, pool: str = "default") -> int:
        """Messages no worker took yet: on the pool's list; or in the outbox and ready in
        the pool's queue on RabbitMQ."""
        if not self.settings.broker_is_amqp:
            return int(self.client.llen(queue_name(pool)))
        outboxed = int(self.client.llen(outbox_key(Keys(self.settings.key_prefix))))
        return outboxed + self._queue(pool)[0]

    def left_of(self, call_id: str, workers: Sequence[WorkerProcess], pool: str = "default") -> int:
        """Messages of the call the broker would still deliver, once `workers` (those
        that serve the pool) stopped (a warm shutdown: what they run is finished and
        acknowledged). On Redis, the messages that carry the call on the list or in the
        unacked hash; on RabbitMQ, any in the outbox or the pool's queue (the module's
        vhost holds none of other tests once each test's workers are gone)."""
        for worker in workers:
            worker.stop()
        if not self.settings.broker_is_amqp:
            queued = self.client.lrange(queue_name(pool), 0, -1)
            unacked = self.client.hvals(Channel.unacked_key)
            return sum(call_id.encode() in m for m in [*queued, *unacked])
        # A consumer's unacknowledged messages are back once RabbitMQ dropped it.
        wait_for(lambda: self._queue(pool)[1] == 0, 10, f"no consumer of {queue_name(pool)}")
        outbox = self.client.lrange(outbox_key(Keys(self.settings.key_prefix)), 0, -1)
        return sum(call_id.encode() in m for m in outbox) + self._queue(pool)[0]

    def ready_for_a_kill(self) -> None:
        """Wait until a worker may be killed without stalling redelivery: on Redis, until
        no kombu sweep holds its mutex (a worker killed holding it stalls every sweep
        until it expires). RabbitMQ's redelivery needs no sweep."""
        if not self.settings.broker_is_amqp:
            wait_for(lambda: not self.client.exists(Channel.unacked_mutex_key), 5, "the mutex")

    def redelivery(self, tools: list[FunctionTool]) -> Redelivery:
        """When a killed worker's calls run again. On Redis, after the visibility timeout
        from their delivery (kombu's sweep: `recovery_bound_s` at most); on RabbitMQ,
        when it sees the worker's connection drop."""
        if self.settings.broker_is_amqp:
            # The redelivery runs once the dead delivery's claim lapsed.
            return Redelivery(0.0, AMQP_REDELIVERY_S + claim_lease_s(self.settings))
        visibility = broker_visibility_timeout_s(self.settings, tools)
        return Redelivery(float(visibility), recovery_bound_s(self.settings, tools))

    def _queue(self, pool: str) -> tuple[int, int]:
        """(ready messages, consumers) of the pool's queue on RabbitMQ, now; (0, 0) for
        a queue not declared yet."""
        with Connection(self.settings.require_broker_url(), connect_timeout=AMQP_TIMEOUT_S) as c:
            c.ensure_connection(max_retries=1)
            channel: Any = c.channel()  # py-amqp's Channel (kombu types it StdChannel)
            try:
                ok = channel.queue_declare(queue_name(pool), passive=True)
            except c.channel_errors:  # NOT_FOUND
                return 0, 0
            return int(ok.message_count), int(ok.consumer_count)


@contextlib.asynccontextmanager
async def publishing(settings: Settings, client: aioredis.Redis) -> AsyncIterator[CeleryPublisher]:
    """A publisher of task messages where the settings' workers take them, as a replica
    sends them: onto the Redis queues; or into the outbox, with a relay to RabbitMQ
    running until the end."""
    signer = CallSigner.of(settings.fleet_key)
    if not settings.broker_is_amqp:
        yield CeleryPublisher(client, signer=signer)
        return
    keys = Keys(settings.key_prefix)
    relay = OutboxRelay(client, keys, settings.require_broker_url())
    relay.start()
    try:
        yield CeleryPublisher(client, outbox=outbox_key(keys), on_outbox=relay.wake, signer=signer)
    finally:
        await relay.stop()


class SentCopies:
    """How many copies of each call's task message reached the broker: one, unless a send
    was applied twice (a retried write, say). On Redis every copy is delivered and counted
    (the call's delivery counter: no worker dies in such a test, and no first-delivery
    claim drops a copy there) or still waits on the list; on RabbitMQ workers drop a
    second copy unseen (the claim of a first delivery), so the copies are counted as this
    process's outbox relays publish them. Make it before the calls are sent."""

    def __init__(self, broker: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
        self._broker = broker
        self._published: Counter[str] = Counter()
        if broker.settings.broker_is_amqp:
            publish = AmqpPublisher.publish

            def counted(publisher: AmqpPublisher, raws: Sequence[bytes | str]) -> None:
                publish(publisher, raws)  # confirmed: they reached RabbitMQ
                self._published.update(
                    str(call_fields(task_kwargs(r)["call"])["call_id"]) for r in raws
                )

            monkeypatch.setattr(AmqpPublisher, "publish", counted)

    def of(self, call_id: str, pool: str = "default") -> int:
        if self._broker.settings.broker_is_amqp:
            return self._published[call_id]
        client = self._broker.client
        delivered = first_deliveries(client, Keys(self._broker.settings.key_prefix), call_id)
        queued = client.lrange(queue_name(pool), 0, -1)
        return delivered + sum(call_id.encode() in m for m in queued)
