"""A Celery task message (protocol 2) read back: from kombu's Redis-transport envelope,
from a RabbitMQ delivery, or from the message Celery's consumer received."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from pydantic_core import from_json

from toolfleet.shared.json_depth import HIGHEST_MAX_JSON_DEPTH, SETTING, text_depth

# A message toolfleet sends nests a call's arguments and state (TOOLFLEET_MAX_JSON_DEPTH
# levels at most) in a few levels of its own. Deeper, it is not one of ours, and a JSON
# parser would recurse that far: it is measured first.
MAX_MESSAGE_DEPTH = HIGHEST_MAX_JSON_DEPTH + 16
# kombu's delivery tag, a plain string: found without parsing a message too deep to parse.
_TAG = re.compile(r'"delivery_tag"\s*:\s*"([^"\\]+)"')


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

    @cached_property
    def retries(self) -> int:
        """How many times the task was retried before this message (0: a first run)."""
        return int(self.headers.get("retries") or 0)

    @property
    def argsrepr(self) -> str | None:
        """What the sender said Flower shows as its arguments, if it said."""
        return self.headers.get("argsrepr")

    @property
    def kwargsrepr(self) -> str | None:
        """What the sender said Flower shows as its keyword arguments, if it said."""
        return self.headers.get("kwargsrepr")

    @property
    def root_id(self) -> str | None:
        """The id of the first task of its workflow (its own for a call)."""
        return self.headers.get("root_id")

    @property
    def parent_id(self) -> str | None:
        """The id of the task that sent it, if a task did."""
        return self.headers.get("parent_id")

    @property
    def delivery_info(self) -> dict[str, Any]:
        """The exchange and routing key it was sent with (a retry is sent the same way)."""
        return dict(self.properties.get("delivery_info") or {})

    def eta(self) -> datetime | None:
        """When the message may run (a retry's countdown), or None: now."""
        return self._eta

    def expires(self) -> datetime | None:
        """After when the message must not run, or None."""
        return self._expires

    # Each read a few times per message taken (an io worker takes thousands at once).
    @cached_property
    def _eta(self) -> datetime | None:
        return header_instant(self.headers.get("eta"))

    @cached_property
    def _expires(self) -> datetime | None:
        return header_instant(self.headers.get("expires"))


def decode(raw: bytes | str) -> TaskMessage:
    """The task message in `raw`, kombu's JSON envelope of a Celery protocol 2 message.

    Raises MalformedMessage saying what is wrong."""
    _measure(raw, "the message")
    try:
        # pydantic-core's parser: an io worker decodes every message it takes, and this
        # takes half the time of json.loads (kombu writes UTF-8 JSON).
        envelope = from_json(raw)
        headers = envelope["headers"]
        properties = envelope["properties"]
        body = _body(envelope, properties)
        content_type = envelope.get("content-type", "application/json")
        tag = str(properties["delivery_tag"])
        return _task_message(tag, content_type, headers, properties, body)
    except MalformedMessage:
        raise
    except (ValueError, KeyError, TypeError) as exc:  # json, base64, shape
        raise MalformedMessage(f"not a Celery protocol 2 task message: {exc!r}") from exc


def decode_delivery(
    tag: str,
    body: bytes | str,
    headers: Mapping[str, Any] | None,
    properties: Mapping[str, Any],
    delivery_info: Mapping[str, Any],
) -> TaskMessage:
    """The task message of a RabbitMQ delivery (its body, application headers, basic
    properties and delivery info, as py-amqp reads them), acknowledged by `tag`. Its
    delivery info is what Celery's request makes of a delivery: the exchange, routing
    key, priority and redelivered flag.

    Raises MalformedMessage saying what is wrong."""
    try:
        content_type = properties.get("content_type", "application/json")
        delivered = {
            "correlation_id": properties.get("correlation_id"),
            "reply_to": properties.get("reply_to"),
            "priority": properties.get("priority"),
            "delivery_mode": properties.get("delivery_mode"),
            "delivery_info": {
                "exchange": delivery_info.get("exchange"),
                "routing_key": delivery_info.get("routing_key"),
                "priority": properties.get("priority"),
                "redelivered": bool(delivery_info.get("redelivered")),
            },
        }
        return _task_message(tag, content_type, dict(headers or {}), delivered, body)
    except MalformedMessage:
        raise
    except (ValueError, KeyError, TypeError) as exc:  # json, shape
        raise MalformedMessage(f"not a Celery protocol 2 task message: {exc!r}") from exc


def _task_message(
    tag: str,
    content_type: object,
    headers: dict[str, Any],
    properties: dict[str, Any],
    body: bytes | str,
) -> TaskMessage:
    """The message of a protocol 2 `body` (JSON [args, kwargs, embed]) and its `headers`."""
    if content_type != "application/json":
        raise MalformedMessage(f"content type {content_type!r} is not JSON")
    _check_fields(headers, properties)
    _measure(body, "its body")
    args, kwargs, _embed = from_json(body)
    return TaskMessage(
        tag=tag,
        task=str(headers["task"]),
        task_id=str(headers["id"]),
        args=list(args),
        kwargs=dict(kwargs),
        headers=dict(headers),
        properties=dict(properties),
    )


def _check_fields(headers: object, properties: object) -> None:
    """MalformedMessage unless the fields the intake reads of every message before it
    runs it have the types Celery gives them: a forged one must not stop the intake."""
    if not isinstance(headers, dict) or not isinstance(properties, dict):
        raise MalformedMessage("its headers and properties are not JSON objects")
    retries = headers.get("retries") or 0
    if isinstance(retries, bool) or not isinstance(retries, int | str):
        raise MalformedMessage(f"its retries header {retries!r} is not a count")
    try:
        if int(retries) < 0:
            raise ValueError(retries)
    except ValueError:
        raise MalformedMessage(f"its retries header {retries!r} is not a count") from None
    if not isinstance(properties.get("delivery_info") or {}, dict):
        raise MalformedMessage("its delivery_info is not a JSON object")


def _measure(text: str | bytes, what: str) -> None:
    if _openings(text) <= MAX_MESSAGE_DEPTH:
        return  # no deeper than it has brackets: no need to scan it a character at a time
    if text_depth(text, stop_above=MAX_MESSAGE_DEPTH) > MAX_MESSAGE_DEPTH:
        raise MalformedMessage(
            f"{what} nests JSON objects and arrays more than {MAX_MESSAGE_DEPTH} levels deep: "
            f"not a task message toolfleet sends (a call's arguments nest {SETTING} levels "
            "at most)"
        )


def _openings(text: str | bytes) -> int:
    """How many `[` and `{` `text` holds, strings included: its depth is no more. Bytes
    are counted as bytes: in any encoding json.loads reads (UTF-8, -16, -32) each of
    those characters holds its byte, so the count is never less."""
    if isinstance(text, str):
        return text.count("[") + text.count("{")
    return text.count(b"[") + text.count(b"{")


def header_instant(value: object) -> datetime | None:
    """A message header's instant (`eta`, `expires`: ISO 8601, UTC when it names no
    zone), or None when it has none or it is no instant."""
    if not value:
        return None
    try:
        instant = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return instant if instant.tzinfo else instant.replace(tzinfo=UTC)  # Celery's are UTC


def tag_of(raw: bytes | str) -> str | None:
    """The delivery tag of a message that may not decode as a task, or None."""
    if text_depth(raw, stop_above=MAX_MESSAGE_DEPTH) > MAX_MESSAGE_DEPTH:
        text = raw if isinstance(raw, str) else raw.decode("latin-1")
        tags = _TAG.findall(text)
        return tags[-1] if tags else None  # kombu writes `properties` last
    try:
        return str(json.loads(raw)["properties"]["delivery_tag"])
    except (ValueError, KeyError, TypeError):
        return None


def _body(envelope: dict[str, Any], properties: dict[str, Any]) -> Any:
    """The envelope's body as Celery encoded it (kombu's Redis transport base64-encodes it)."""
    body = envelope["body"]
    return base64.b64decode(body) if properties.get("body_encoding") == "base64" else body


def task_kwargs(raw: bytes | str) -> Any:
    """The keyword arguments of the task message in `raw`, read without the checks of
    `decode` (a gauge's glance at a queue's tail). Raises ValueError, TypeError,
    KeyError, AttributeError or binascii.Error when `raw` is not one."""
    message = json.loads(raw)
    body = _body(message, message.get("properties", {}))
    _, kwargs, _ = json.loads(body)
    return kwargs


def received_kwargs(message: Any) -> tuple[Any, str]:
    """The keyword arguments of a task message Celery's consumer received (kombu's
    `Message`: its body is [args, kwargs, embed]) and the queue it came from; None and ""
    for a body of another shape."""
    try:
        _args, kwargs, _embed = message.payload
        queue = str((message.delivery_info or {}).get("routing_key") or "")
        return kwargs, queue
    except Exception:  # any body at all may come: what parses is read
        return None, ""
