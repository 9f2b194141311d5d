"""The Celery consumer step that hands an io worker's queues to its intake.

Celery's consumer still runs beside it, for everything but those queues: remote control
(the stop command, Flower's inspections), worker events and heartbeats. The step takes
over a worker's queues when the worker runs Celery's threads pool (how io pools run) and
the queues are io pools'; a prefork worker keeps Celery's consumer. The intake takes
them from Redis lists, or over a RabbitMQ connection of its own when the tool queues are
on RabbitMQ.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import bootsteps

from toolfleet.shared.config import Settings
from toolfleet.shared.keys import QUEUE_PREFIX
from toolfleet.shared.outages import resilient_client
from toolfleet.shared.pool_kinds import CELERY_POOL
from toolfleet.workers.heartbeat import INTAKE_QUEUES, celery_pool_name
from toolfleet.workers.intake.amqp_source import AmqpSource
from toolfleet.workers.intake.broker import MIN_REDIS, supports_intake
from toolfleet.workers.intake.events import task_events_wanted
from toolfleet.workers.intake.intake import Intake
from toolfleet.workers.intake.redis_source import RedisSource
from toolfleet.workers.intake.source import Source

log = logging.getLogger(__name__)


def intake_queues(consumer: Any, settings: Settings) -> list[str]:
    """The queues of `consumer` its intake takes: those of io pools, on the threads pool,
    unless TOOLFLEET_IO_INTAKE is off."""
    if not settings.io_intake or celery_pool_name(consumer) != CELERY_POOL["io"]:
        return []
    names = [q.name for q in consumer.task_consumer.queues]
    return [
        n
        for n in names
        if n.startswith(QUEUE_PREFIX) and settings.pool_kind(n.removeprefix(QUEUE_PREFIX)) == "io"
    ]


def _source(parent: Any, settings: Settings, queues: list[Any], concurrency: int) -> Source:
    """Where the intake of consumer `parent` takes `queues` (Celery's declarations of
    them) from: RabbitMQ, with a prefetch window of the worker's `concurrency`, or Redis."""
    if settings.broker_is_amqp:
        name = f"toolfleet intake {parent.hostname}"
        return AmqpSource(parent.app, queues, concurrency, name)
    url = settings.require_redis_url()
    return RedisSource(parent.app, url, [q.name for q in queues], settings.restore_interval_s)


def _server_supports_intake(settings: Settings) -> bool:
    """Whether the broker serves the intake: RabbitMQ does; Redis from MIN_REDIS on."""
    if settings.broker_is_amqp:
        return True
    client = resilient_client(settings.require_redis_url())
    try:
        if supports_intake(client):
            return True
    finally:
        client.close()
    log.warning(
        "the io queues are taken one message at a time by Celery's consumer: the batched "
        "intake needs Redis %d.%d or later; upgrade Redis (or use Valkey) for wide fan-outs",
        *MIN_REDIS,
    )
    return False


def intake_step(settings: Settings) -> type[bootsteps.StartStopStep]:
    """The consumer step class for workers of `settings`."""

    class IntakeStep(bootsteps.StartStopStep):
        requires = ("celery.worker.consumer.tasks:Tasks",)
        label = "toolfleet intake"

        def __init__(self, parent: Any, **kwargs: Any) -> None:
            super().__init__(parent, **kwargs)
            self.intake: Intake | None = None

        def start(self, parent: Any) -> None:
            queues = intake_queues(parent, settings)
            if queues and self.intake is None and not _server_supports_intake(settings):
                queues = []  # Celery's consumer keeps them
            declared = [q for q in parent.task_consumer.queues if q.name in queues]
            for name in queues:  # again after a reconnection, which consumes them anew
                parent.task_consumer.cancel_by_queue(name)
            setattr(parent, INTAKE_QUEUES, queues)
            if not queues or self.intake is not None:
                return
            concurrency = int(parent.controller.concurrency)
            self.intake = Intake(
                parent.app,
                _source(parent, settings, declared, concurrency),
                parent.hostname,
                concurrency,
                threads=settings.io_threads,
                # Read on each event: Celery's control commands turn them on and off.
                task_events=lambda: task_events_wanted(parent),
            )
            self.intake.start()

        def stop(self, parent: Any) -> None:
            pass  # a reconnection: the intake keeps its own connections

        def close(self, parent: Any) -> None:
            if self.intake is not None:  # a warm shutdown: the running calls finish
                self.intake.stop(wait=True)

        def terminate(self, parent: Any) -> None:
            if self.intake is not None:  # a cold shutdown: redelivered elsewhere
                self.intake.stop(wait=False)

        def shutdown(self, parent: Any) -> None:
            self.terminate(parent)

    return IntakeStep
