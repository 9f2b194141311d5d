"""A Celery task message (protocol 2) as kombu's Redis transport stores it, decoded."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


class MalformedMessage(ValueError):
    """A message the intake cannot run: not JSON, not protocol 2, or missing a field."""


@dataclass(frozen=True)
class TaskMessage:
    """What running a task needs from its message, and the delivery tag that acks it."""

    tag: str
    task: str
    task_id: str
    args: list[Any]
    kwargs: dict[str, Any]
    headers: dict[str, Any]
    properties: dict[str, Any]

    @property
    def retries(self) -> int:
        """How many times the task was retried before this message (0: a first run)."""
        return int(self.headers.get("retries") or 0)

    @property
    def delivery_info(self) -> dict[str, Any]:
        """The exchange and routing key it was sent with (a retry is sent the same way)."""
        return dict(self.properties.get("delivery_info") or {})

    def eta(self) -> datetime | None:
        """When the message may run (a retry's countdown), or None: now."""
        return _instant(self.headers.get("eta"))

    def expires(self) -> datetime | None:
        """After when the message must not run, or None."""
        return _instant(self.headers.get("expires"))


def decode(raw: bytes | str) -> TaskMessage:
    """The task message in `raw`, kombu's JSON envelope of a Celery protocol 2 message.

    Raises MalformedMessage saying what is wrong."""
    try:
        envelope = json.loads(raw)
        headers = envelope["headers"]
        properties = envelope["properties"]
        body: Any = envelope["body"]
        if properties.get("body_encoding") == "base64":
            body = base64.b64decode(body)
        if envelope.get("content-type", "application/json") != "application/json":
            raise MalformedMessage(f"content type {envelope.get('content-type')!r} is not JSON")
        args, kwargs, _embed = json.loads(body)
        return TaskMessage(
            tag=str(properties["delivery_tag"]),
            task=str(headers["task"]),
            task_id=str(headers["id"]),
            args=list(args),
            kwargs=dict(kwargs),
            headers=dict(headers),
            properties=dict(properties),
        )
    except MalformedMessage:
        raise
    except (ValueError, KeyError, TypeError) as exc:  # json, base64, shape
        raise MalformedMessage(f"not a Celery protocol 2 task message: {exc!r}") from exc


def _instant(value: object) -> datetime | None:
    if not value:
        return None
    try:
        instant = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return instant if instant.tzinfo else instant.replace(tzinfo=UTC)  # Celery's are UTC


def tag_of(raw: bytes | str) -> str | None:
    """The delivery tag of a message that may not decode as a task, or None."""
    try:
        return str(json.loads(raw)["properties"]["delivery_tag"])
    except (ValueError, KeyError, TypeError):
        return None
