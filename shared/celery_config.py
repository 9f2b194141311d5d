"""The Celery configuration both sides agree on (docs/design.md, "Workers and pools")."""

from __future__ import annotations

import math
import ssl
from typing import Any

from toolfleet.shared.config import PoolKind, Settings
from toolfleet.shared.keys import queue_name
from toolfleet.shared.redis_clients import broker_connection
from toolfleet.shared.tools import FunctionTool


def tool_time_limit(tool: FunctionTool, settings: Settings) -> float:
    """A tool's time limit in seconds: its own `timeout_s`, else the settings' default.

    Workers make it the task's soft limit; the orchestrator's deadline for a call starts from it.
    """
    return tool.options.timeout_s or settings.default_timeout_s


def tool_pool(tool: FunctionTool, settings: Settings) -> str:
    """The pool whose workers run a tool: its own `pool`; else by its kind, the default io
    pool or the default (cpu) pool; a tool without a kind is io when it is `async def`."""
    if tool.options.pool:
        return tool.options.pool
    kind = tool.options.kind or ("io" if tool.is_async else "cpu")
    return settings.default_io_pool if kind == "io" else settings.default_pool


def tool_kind(tool: FunctionTool, settings: Settings) -> PoolKind:
    """The kind of the pool that runs a tool (what a worker of that pool must be)."""
    return settings.pool_kind(tool_pool(tool, settings))


# A sweep takes milliseconds; this only bounds how long a dead holder blocks the next.
UNACKED_MUTEX_EXPIRE_S = 10


def broker_visibility_timeout_s(settings: Settings, tools: list[FunctionTool]) -> int:
    """The broker must not redeliver a message while its tool may still be running."""
    longest = max((tool_time_limit(t, settings) for t in tools), default=settings.default_timeout_s)
    # Hard limit = soft limit + 1 s (see toolfleet.workers.tasks), so this stays above it.
    return math.ceil(longest + 1 + settings.redelivery_margin_s)


def recovery_bound_s(settings: Settings, tools: list[FunctionTool]) -> float:
    """At most this long after a worker dies, its unfinished calls run elsewhere."""
    return broker_visibility_timeout_s(settings, tools) + settings.restore_interval_s


def broker_tls(url: str) -> dict[str, Any] | None:
    """TLS options of the broker for a rediss:// URL: verify the server's certificate,
    as redis-py does (kombu alone would not verify). `ssl_*` parameters in the URL's query
    (ssl_ca_certs, ssl_cert_reqs, ssl_certfile, ssl_keyfile) replace these."""
    if not url.startswith("rediss://"):
        return None
    return {"ssl_cert_reqs": ssl.CERT_REQUIRED}


def celery_config(settings: Settings, tools: list[FunctionTool]) -> dict[str, Any]:
    """The configuration of a worker's Celery app serving `tools`.

    Tasks are acked late, so a dead worker's task is redelivered once the visibility
    timeout (above the longest time limit) passes (on RabbitMQ: once its connection
    drops); JSON only; no result backend.
    """
    if settings.broker_is_amqp:
        return {**_common_config(settings), **amqp_broker_config(settings)}
    visibility_timeout = broker_visibility_timeout_s(settings, tools)
    # A Sentinel URL becomes kombu's list of sentinel:// URLs and the master's name.
    broker_url, sentinel_options = broker_connection(settings.require_redis_url())
    return {
        "broker_url": broker_url,
        "broker_use_ssl": broker_tls(settings.require_redis_url()),
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {
            "visibility_timeout": visibility_timeout,
            # kombu sweeps for messages of dead workers every interval x throttle seconds
            # (10 x 10 by default): sweep every interval, so the bound is what we state.
            "unacked_restore_interval": settings.restore_interval_s,
            "unacked_restore_throttle": 1,
            # The sweep holds a lock; a worker killed holding it would stall every
            # sweep for kombu's default 300 s.
            "unacked_mutex_expire": UNACKED_MUTEX_EXPIRE_S,
            **sentinel_options,
        },
        **_common_config(settings),
    }


# The arguments every tool queue on RabbitMQ is declared with (workers and the outbox
# relay must agree, or the second declaration fails): replicated and durable.
QUORUM_QUEUE_ARGUMENTS: dict[str, Any] = {"x-queue-type": "quorum"}


# RabbitMQ looks for data from a client once every heartbeat timeout and closes the
# connection at the second look in a row that found none: 2 to 3 timeouts after the
# last data it received.
AMQP_HEARTBEAT_TIMEOUTS_TO_CLOSE = 3
# How often Celery's consumer checks its heartbeats, per heartbeat timeout: it sends one
# whenever it sent nothing for a third of the timeout, so RabbitMQ hears from a busy
# worker (its calls on pool processes) well within the timeout.
HEARTBEAT_CHECKS_PER_TIMEOUT = 3


def amqp_lost_worker_bound_s(settings: Settings) -> float:
    """At most this long after a worker on RabbitMQ goes silent (its process frozen, its
    host or network lost), RabbitMQ closes its connection and delivers the calls it held
    again: 3 heartbeat timeouts (`amqp_heartbeat_s`; less where RabbitMQ's own is lower);
    without heartbeats, unbounded."""
    if not settings.amqp_heartbeat_s:
        return math.inf
    return float(AMQP_HEARTBEAT_TIMEOUTS_TO_CLOSE * settings.amqp_heartbeat_s)


def amqp_broker_config(settings: Settings) -> dict[str, Any]:
    """The broker settings of a worker whose tool queues are on RabbitMQ: quorum queues
    (`tools.<pool>` are made on first use as quorum ones) and publisher confirms for what
    workers publish (retries, jobs). A worker that dies holding unacked messages loses its
    connection, and RabbitMQ redelivers them at once: no visibility timeout. One that goes
    silent keeps it open until its heartbeats lapse (`amqp_lost_worker_bound_s`)."""
    return {
        "broker_url": settings.require_broker_url(),
        "broker_use_ssl": None,
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {"confirm_publish": True},
        # Celery's consumer (prefork) and the io intake propose it; Celery's own 120 s
        # would leave RabbitMQ's 60 s, past a call's default deadline.
        "broker_heartbeat": settings.amqp_heartbeat_s,
        "broker_heartbeat_checkrate": HEARTBEAT_CHECKS_PER_TIMEOUT,
        "task_default_queue_type": "quorum",
        "task_create_missing_queue_type": "quorum",
        "worker_detect_quorum_queues": True,
    }


def _common_config(settings: Settings) -> dict[str, Any]:
    """What every broker's workers share: JSON only, acks late, one message prefetched."""
    return {
        "task_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "event_serializer": "json",
        # Results travel on our own Redis streams, never through Celery's backend.
        "task_ignore_result": True,
        "result_backend": None,
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "worker_send_task_events": settings.task_events,
        "task_send_sent_event": False,
        "task_default_queue": queue_name(settings.default_pool),
        "task_create_missing_queues": True,
        "worker_hijack_root_logger": False,
        "worker_redirect_stdouts": False,
    }
