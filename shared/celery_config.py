"""The Celery configuration both sides agree on (DESIGN: reliability settings)."""

from __future__ import annotations

from typing import Any

from shared.config import Settings
from shared.keys import queue_name
from shared.tools import FunctionTool

# The broker must not redeliver a message while its tool may still be running.
VISIBILITY_MARGIN_S = 30.0


def tool_time_limit(tool: FunctionTool, settings: Settings) -> float:
    return tool.options.timeout_s or settings.default_timeout_s


def tool_pool(tool: FunctionTool, settings: Settings) -> str:
    return tool.options.pool or settings.default_pool


def celery_config(settings: Settings, tools: list[FunctionTool]) -> dict[str, Any]:
    longest = max((tool_time_limit(t, settings) for t in tools), default=settings.default_timeout_s)
    # Hard limit = soft limit + 1 s (see workers.tasks), so this stays above it.
    visibility_timeout = int(longest + 1 + VISIBILITY_MARGIN_S)
    return {
        "broker_url": settings.require_redis_url(),
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {"visibility_timeout": visibility_timeout},
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
        "worker_send_task_events": True,
        "task_send_sent_event": False,
        "task_default_queue": queue_name(settings.default_pool),
        "task_create_missing_queues": True,
        "worker_hijack_root_logger": False,
        "worker_redirect_stdouts": False,
    }
