"""The settings and Celery configuration of the tool queues on RabbitMQ, and the outbox
message a relay publishes (no broker needed)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from tests.support import tool_call
from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.shared.celery_config import (
    QUORUM_QUEUE_ARGUMENTS,
    amqp_lost_worker_bound_s,
    celery_config,
)
from toolfleet.shared.celery_wire.consumer import EVENT_PUBLISH_RETRIES, _retrying_at_most
from toolfleet.shared.celery_wire.rabbitmq import amqp_message
from toolfleet.shared.config import Settings
from toolfleet.shared.errors import ConfigError

REDIS = "redis://127.0.0.1:6379/0"
AMQP = "amqp://guest:guest@127.0.0.1:5672/tests"


def test_without_a_broker_url_the_queues_stay_on_redis() -> None:
    settings = Settings(redis_url=REDIS)
    assert not settings.broker_is_amqp
    assert settings.require_broker_url() == REDIS
    config = celery_config(settings, [])
    assert config["broker_url"] == REDIS
    assert "visibility_timeout" in config["broker_transport_options"]


def test_an_amqp_broker_url_makes_quorum_queues_acked_late() -> None:
    settings = Settings(redis_url=REDIS, broker_url=AMQP)
    assert settings.broker_is_amqp
    config = celery_config(settings, [])
    assert config["broker_url"] == AMQP
    assert config["task_create_missing_queue_type"] == "quorum"
    assert config["task_default_queue_type"] == "quorum"
    assert config["task_acks_late"] and config["task_reject_on_worker_lost"]
    assert config["worker_prefetch_multiplier"] == 1
    assert QUORUM_QUEUE_ARGUMENTS == {"x-queue-type": "quorum"}


def test_workers_propose_the_amqp_heartbeat_and_a_silent_one_is_dropped_within_3(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings(redis_url=REDIS, broker_url=AMQP)
    assert settings.amqp_heartbeat_s == 10  # RabbitMQ's own 60 s outlasts a call's deadline
    config = celery_config(settings, [])
    assert config["broker_heartbeat"] == 10
    assert config["broker_heartbeat_checkrate"] == 3  # a beat every third of it, at most
    assert amqp_lost_worker_bound_s(settings) == 30 < settings.default_timeout_s
    monkeypatch.setenv("TOOLFLEET_AMQP_HEARTBEAT_S", "0")
    off = Settings(redis_url=REDIS, broker_url=AMQP)
    assert celery_config(off, [])["broker_heartbeat"] == 0
    assert amqp_lost_worker_bound_s(off) == math.inf


def test_an_event_published_with_retries_gives_up_after_a_few_connections() -> None:
    class Connection:
        def __init__(self) -> None:
            self.policies: list[dict[str, Any]] = []

        def ensure(self, *args: Any, **kwargs: Any) -> None:
            self.policies.append(kwargs)

    connection = Connection()
    bounded = _retrying_at_most(connection, EVENT_PUBLISH_RETRIES)  # type: ignore[arg-type]
    bounded.ensure(object(), print)  # Celery's worker heartbeats: retry, no policy
    bounded.ensure(object(), print, max_retries=None)
    bounded.ensure(object(), print, max_retries=5)
    assert [p["max_retries"] for p in connection.policies] == [2, 2, 5]


def test_a_broker_url_that_is_not_amqp_says_what_to_change() -> None:
    settings = Settings(redis_url=REDIS, broker_url="redis://elsewhere:6379/0")
    with pytest.raises(ConfigError, match="TOOLFLEET_BROKER_URL must be an amqp"):
        settings.require_broker_url()


def test_an_outbox_message_becomes_the_celery_task_message_on_its_queue() -> None:
    call = tool_call("c1", "step", "s1", "results", {"n": 1})
    publisher = CeleryPublisher(None)  # type: ignore[arg-type]  # encodes only: no client
    encoded = publisher.encode(publisher.dispatch(call, "tools.default"))
    queue, published = amqp_message(encoded)
    assert queue == "tools.default"
    assert published["content_type"] == "application/json"
    assert published["delivery_mode"] == 2
    assert published["headers"]["task"] == "tool.step"
    _, kwargs, _ = json.loads(published["body"])
    sent = json.loads(kwargs["call"])  # the envelope, as JSON text
    assert sent["call_id"] == "c1" and sent["args"] == {"n": 1}
