"""The worker's kombu transport on a real Redis: one synchronous client per connection
pool, and the operations that use it (fanout events, acks, the unacked index) unchanged."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator

import pytest
import redis
from kombu import Connection, Exchange, Queue
from kombu.transport import redis as kombu_redis

from toolfleet.shared.celery_wire.transport import Channel, Transport, broker_transport
from toolfleet.shared.config import Settings

pytestmark = pytest.mark.integration

WAIT_S = 5


@pytest.fixture
def connection(settings: Settings) -> Iterator[Connection]:
    url = settings.require_redis_url()
    with Connection(url, transport=broker_transport(url)) as conn:
        yield conn


def test_a_channel_builds_one_client_per_pool(connection: Connection) -> None:
    channel = connection.default_channel
    assert isinstance(channel, Channel)
    first = channel._create_client()
    assert channel._create_client() is first
    assert first.connection_pool is channel.pool
    # The asynchronous client (BRPOP) is kombu's own, on its own pool.
    assert channel.client is not first and channel.client.connection_pool is channel.async_pool
    channel._disconnect_pools()  # as kombu does after a connection error
    renewed = channel._create_client()
    assert renewed is not first and renewed.connection_pool is channel.pool
    assert renewed.ping()


def test_fanout_events_acks_and_redelivery_work_through_the_shared_client(
    connection: Connection, settings: Settings
) -> None:
    """A fanout message (how task events reach Flower) is received; an acked message
    leaves the unacked index, a rejected one goes back to its queue."""
    name = f"tftest-broker-{uuid.uuid4().hex[:8]}"
    events = Exchange(f"{name}.events", type="fanout")
    work = Queue(f"{name}.work")
    channel = connection.default_channel
    client = redis.Redis.from_url(settings.require_redis_url())
    try:
        listener = client.pubsub(ignore_subscribe_messages=True)
        (topic,) = channel._get_publish_topics(events.name, "")
        listener.subscribe(topic)
        assert listener.get_message(timeout=WAIT_S) is None  # the subscription's confirmation
        producer = connection.Producer()
        producer.publish({"event": "task-succeeded"}, exchange=events, declare=[events])
        heard = listener.get_message(timeout=WAIT_S)
        listener.close()
        assert heard is not None
        body = json.loads(heard["data"])["body"]  # kombu's envelope, its body base64-encoded
        assert json.loads(base64.b64decode(body)) == {"event": "task-succeeded"}

        producer.publish({"n": 1}, routing_key=work.name, declare=[work])
        producer.publish({"n": 2}, routing_key=work.name, declare=[work])
        acked = work(channel).get(accept=["json"])
        rejected = work(channel).get(accept=["json"])
        assert acked is not None and rejected is not None
        assert len(channel.qos._delivered) == 2
        acked.ack()
        rejected.reject(requeue=True)
        assert client.zcard(channel.unacked_index_key) == 0
        assert client.llen(work.name) == 1
        again = work(channel).get(accept=["json"])
        assert again is not None and again.payload == {"n": 2}
        again.ack()
    finally:
        client.delete(work.name)
        client.close()


@pytest.mark.parametrize(
    ("url", "ours"),
    [
        ("redis://127.0.0.1:6379/0", True),
        ("rediss://redis.example:6380/0", True),
        ("sentinel://127.0.0.1:26379", False),
    ],
)
def test_plain_redis_urls_get_this_transport_others_kombus_own(url: str, ours: bool) -> None:
    chosen = broker_transport(url)
    assert (chosen is not None) == ours
    if chosen is not None:
        assert Connection(url, transport=chosen).get_transport_cls() is Transport
        assert issubclass(Transport, kombu_redis.Transport)
