"""A Celery task message (protocol 2) in kombu's Redis-transport envelope, built without
Celery's producer.

Celery's `send_task` is synchronous and would stall the orchestrator's event loop; the
message is built here - its headers and body by Celery's own `create_task_message`, the
envelope as kombu's Redis transport writes it - and pushed by the caller with its own
pipelined writes.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from celery import Celery
from pydantic_core import to_json

from toolfleet.shared.ids import unique_hex

# What kombu's Redis transport stores of every message: the body base64-encoded, JSON.
BODY_ENCODING = "base64"
CONTENT_TYPE = "application/json"
CONTENT_ENCODING = "utf-8"
# Persistent (AMQP's delivery mode 2), as Celery's producer sends a task.
DELIVERY_MODE = 2


class TaskMessageBuilder:
    """Builds the messages of tasks sent from `origin` (`<role>@<host>`: Flower shows it
    as the sender)."""

    def __init__(self, origin: str) -> None:
        self._origin = origin
        # Used only to build messages (pure); it never connects anywhere.
        self._celery = Celery("toolfleet-orchestrator", set_as_current=False)

    def redis_message(
        self,
        task: str,
        kwargs: dict[str, Any],
        *,
        queue: str,
        argsrepr: str,
        kwargsrepr: str,
        headers: Mapping[str, str] | None = None,
    ) -> str:
        """The JSON kombu's Redis transport pushes onto `queue`'s list for a call of
        `task` with `kwargs` (no positional arguments), priority 0 on the default
        exchange. `argsrepr` and `kwargsrepr` are what Flower shows of its arguments;
        `headers` are added to Celery's own (a trace context)."""
        task_id = unique_hex()
        message = self._celery.amqp.create_task_message(
            task_id,
            task,
            args=(),
            kwargs=kwargs,
            argsrepr=argsrepr,
            kwargsrepr=kwargsrepr,
            origin=self._origin,
        )
        if headers is not None:
            message.headers.update(headers)
        # pydantic-core's JSON encoder: ~2 us where the standard library's takes ~11.
        body = to_json(message.body)
        return to_json(
            {
                "body": base64.b64encode(body).decode(),
                "content-encoding": CONTENT_ENCODING,
                "content-type": CONTENT_TYPE,
                "headers": message.headers,
                "properties": {
                    **message.properties,
                    "body_encoding": BODY_ENCODING,
                    "delivery_tag": unique_hex(),
                    "delivery_mode": DELIVERY_MODE,
                    "priority": 0,
                    "delivery_info": {"exchange": "", "routing_key": queue},
                },
            }
        ).decode()
