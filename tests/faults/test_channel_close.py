"""The worker's kombu channel when Redis goes away under it: a real redis-server, killed."""

from __future__ import annotations

import contextlib
import socket
import uuid

import pytest
from kombu import Connection, Consumer, Producer, Queue
from kombu.message import Message

from tests.faults.servers import RedisServer
from toolfleet.shared.celery_wire.transport import broker_transport

WAIT_S = 5


def test_a_worker_channel_that_lost_redis_closes_with_its_unacked_message() -> None:
    """Given a worker's channel holding an unacknowledged message while its BRPOP waits
    for the next, when Redis dies, one close closes the channel. (kombu's own close
    stopped at the failed read; Celery's consumer closed the channel again once its
    transport was gone, and the worker died of an AttributeError.)"""
    with RedisServer(appendonly=False) as server:
        url = server.url()
        with Connection(url, transport=broker_transport(url)) as connection:
            channel = connection.channel()
            queue = Queue(f"tffault-close-{uuid.uuid4().hex[:8]}", channel=channel)
            queue.declare()
            Producer(channel).publish({"n": 1}, routing_key=queue.name)
            taken: list[Message] = []
            consumer = Consumer(channel, [queue], callbacks=[lambda _, m: taken.append(m)])
            consumer.consume()
            connection.drain_events(timeout=WAIT_S)
            with pytest.raises(socket.timeout):  # nothing more: a BRPOP waits for it
                connection.drain_events(timeout=0.1)
            assert len(taken) == 1 and channel._in_poll
            server.kill()
            with contextlib.suppress(*connection.connection_errors):
                channel.close()  # restoring the message needs Redis too: it fails
            assert channel.closed
