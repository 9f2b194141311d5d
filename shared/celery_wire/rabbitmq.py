"""Task messages on RabbitMQ: a message built for kombu's Redis transport published as
kombu's py-amqp transport sends it, with publisher confirms, the depth of a queue, and
a consumer's socket reads made larger.

The orchestrator builds every task message once, in the Redis envelope
(shared.celery_wire.build); with the tool queues on RabbitMQ an outbox relay publishes
those same messages here.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any

import amqp
from amqp.exceptions import ChannelError
from amqp.serialization import decode_properties_basic, dumps
from kombu import Connection

from toolfleet.shared.celery_config import QUORUM_QUEUE_ARGUMENTS

# How long a publisher waits for RabbitMQ's next confirm before it gives the batch up
# (and the caller publishes it again on a new connection).
CONFIRM_TIMEOUT_S = 10.0
# What a consumer's socket read asks for at least (`read_ahead`).
READ_AHEAD_BYTES = 8192
# AMQP's content header frame: a message's properties.
CONTENT_HEADER_FRAME = 2
# The application header that marks a delivery whose properties py-amqp could not read
# (`mark_unreadable_properties`); its value says why.
UNREADABLE_PROPERTIES = "x-toolfleet-unreadable-properties"
# The most of py-amqp's error a mark keeps (an AMQP short string holds 255 bytes).
UNREADABLE_REASON_CHARS = 200
# How long a keep-alive waits for what RabbitMQ sent (its heartbeats come every half
# timeout, so what is there is read at once).
KEEP_ALIVE_READ_S = 0.01

log = logging.getLogger(__name__)


def amqp_message(raw: bytes | str) -> tuple[str, dict[str, Any]]:
    """The queue of a message in kombu's Redis envelope and kombu's `Producer.publish`
    arguments for it (body, headers, content type and encoding, delivery mode, priority,
    correlation id, reply-to)."""
    message = json.loads(raw)
    properties = dict(message["properties"])
    queue = properties.pop("delivery_info")["routing_key"]
    body = message["body"]
    if properties.pop("body_encoding", None) == "base64":
        body = base64.b64decode(body)
    properties.pop("delivery_tag", None)
    return queue, {
        "body": body,
        "headers": message["headers"],
        "content_type": message["content-type"],
        "content_encoding": message["content-encoding"],
        "delivery_mode": properties.pop("delivery_mode", 2),
        "priority": properties.pop("priority", 0),
        "correlation_id": properties.get("correlation_id"),
        "reply_to": properties.get("reply_to"),
    }


class Refused(Exception):
    """RabbitMQ refused a message it was sent (basic.nack): sent again, it may be again."""


# What publishing one message raises when that message, not the connection, is at fault:
# RabbitMQ refused it (a nack; a channel error: over max_message_size, a queue declared
# with other arguments), or it is no message in kombu's Redis envelope.
REFUSALS = (Refused, ChannelError, ValueError, KeyError, TypeError)


class AmqpPublisher:
    """Publishes messages in kombu's Redis envelope to RabbitMQ at `url`, every one
    confirmed before `publish` returns. A batch is published at once and its confirms
    awaited together (one broker commit for many messages, not one round trip each).
    Synchronous (py-amqp): run it on a thread of its own. `heartbeat_s`: the AMQP
    heartbeat timeout its connections propose (0: none, for a short-lived publisher);
    with one, call `keep_alive` a few times per timeout while no batch is published."""

    def __init__(
        self, url: str, confirm_timeout_s: float = CONFIRM_TIMEOUT_S, heartbeat_s: int = 0
    ) -> None:
        self._url = url
        self._confirm_timeout_s = confirm_timeout_s
        self._heartbeat_s = heartbeat_s
        # py-amqp's connection is one thread's at a time: a keep-alive or a close from
        # another thread waits for the batch being published.
        self._lock = threading.Lock()
        self._connection: Connection | None = None
        self._channel: Any = None  # py-amqp's Channel, in confirm mode
        self._declared: set[str] = set()
        self._published = 0  # delivery tags given on this channel (confirm mode counts)
        self._confirmed = 0  # every tag up to this one is confirmed
        self._refused: list[int] = []

    def publish(self, raws: Sequence[bytes | str]) -> None:
        """Publish `raws` in order, each on the queue it names (declared on first use as
        the workers declare it); returns once the broker confirmed every one. Raises on a
        connection error, a refusal (nack) or no confirm within the confirm timeout (the
        connection is dropped: the next call opens a new one)."""
        with self._lock:
            self._publish(raws)

    def publish_each(self, raws: Sequence[bytes | str]) -> list[str | None]:
        """Publish `raws` one at a time, each confirmed before the next: what a batch that
        failed is published as, so that one message RabbitMQ refuses holds up no other.
        For each, None once confirmed, or why it was refused (REFUSALS). Raises as
        `publish` does on any other error: the broker is away, and the rest wait."""
        with self._lock:
            return [self._refusal(raw) for raw in raws]

    def _refusal(self, raw: bytes | str) -> str | None:
        try:
            self._publish([raw])
        except REFUSALS as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    def _publish(self, raws: Sequence[bytes | str]) -> None:
        try:
            connection, channel = self._connect()
            for raw in raws:
                queue, arguments = amqp_message(raw)
                if queue not in self._declared:
                    channel.queue_declare(
                        queue, durable=True, auto_delete=False, arguments=QUORUM_QUEUE_ARGUMENTS
                    )
                    self._declared.add(queue)
                body = arguments.pop("body")
                headers = arguments.pop("headers")
                message = amqp.Message(body, application_headers=headers, **arguments)
                channel.basic_publish(message, exchange="", routing_key=queue)
                self._published += 1
            while self._confirmed < self._published:
                if self._refused:
                    raise Refused(f"RabbitMQ refused messages {self._refused[:5]}")
                connection.drain_events(timeout=self._confirm_timeout_s)
            if self._refused:
                raise Refused(f"RabbitMQ refused messages {self._refused[:5]}")
        except Exception:
            self._close()
            raise

    def keep_alive(self) -> None:
        """Between batches: read what RabbitMQ sent (its heartbeats) and send a heartbeat
        when this side sent nothing for half the timeout. RabbitMQ then keeps an idle
        connection open (it closes one silent for 2 to 3 timeouts, and so frees a lost
        host's), and this side finds a connection that went silent now, not at the next
        batch's confirm timeout: it is closed, and the next `publish` opens a new one."""
        with self._lock:
            if self._channel is None or not self._heartbeat_s:
                return
            # py-amqp's connection: kombu's would connect again by itself, under the channel.
            connection = self._channel.connection
            try:
                with contextlib.suppress(socket.timeout):
                    connection.drain_events(timeout=KEEP_ALIVE_READ_S)
                connection.heartbeat_tick()
            except Exception as exc:
                log.warning(
                    "the connection to RabbitMQ is gone (%s: %s): the next batch opens a new one",
                    type(exc).__name__,
                    exc,
                )
                self._close()

    def _confirm(self, tag: int, multiple: bool) -> None:
        # Confirms of one channel come in order; `multiple` covers every tag up to it.
        self._confirmed = max(self._confirmed, tag)

    def _refuse(self, tag: int, multiple: bool) -> None:
        self._refused.append(tag)

    def _connect(self) -> tuple[Connection, Any]:
        if self._connection is None or self._channel is None:
            connection = Connection(self._url, heartbeat=self._heartbeat_s)
            connection.ensure_connection(max_retries=1)
            channel: Any = connection.channel()
            channel.events["basic_ack"].add(self._confirm)
            channel.events["basic_nack"].add(self._refuse)
            channel.confirm_select()
            self._connection, self._channel = connection, channel
            self._declared.clear()
            self._published = self._confirmed = 0
            self._refused = []
        return self._connection, self._channel

    def close(self) -> None:
        """Close the connection, if any."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.release()


def read_ahead(connection: Connection, size: int = READ_AHEAD_BYTES) -> None:
    """Make the py-amqp transport of the connected `connection` read at least `size`
    bytes from its socket at a time.

    py-amqp reads each frame in three reads of the exact size it needs (the frame's
    header, payload and end byte), so a delivery (three frames) costs nine system calls.
    Each lets go of the interpreter, and in a worker whose other threads are busy each
    waits to get it back: a wide turn's deliveries came in markedly slower. py-amqp
    keeps what a read returns beyond what it asked for in its read buffer and reads the
    next frames from there, so a larger read costs only a copy of what is left."""
    transport: Any = connection.connection.transport
    extend_reads(transport, size)


def extend_reads(transport: Any, size: int) -> None:
    """`read_ahead` on py-amqp's `transport` itself."""
    recv = transport._quick_recv  # the socket's recv (read, with TLS), as py-amqp set it
    transport._quick_recv = lambda wanted: recv(max(wanted, size))


def mark_unreadable_properties(connection: Connection) -> None:
    """Make the consumer of the connected `connection` receive a message whose properties
    py-amqp cannot read (a short string that is not UTF-8, as any client of the broker
    may send) with those properties replaced by one application header,
    UNREADABLE_PROPERTIES, saying why: its consumer drops it by its delivery tag.

    py-amqp raises out of `drain_events` on such a header frame, so the consumer never
    sees the delivery: it could only drop the connection, and RabbitMQ would deliver the
    same message first again, on every connection, for ever."""
    amqp_connection: Any = connection.connection
    amqp_connection.on_inbound_frame = _reading_unreadable(amqp_connection.on_inbound_frame)


def _reading_unreadable(on_frame: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """py-amqp's frame handler `on_frame`, given a readable header in place of one whose
    properties it failed to read. Its message waits for its header still (py-amqp reads
    the properties before it changes anything), so the same handler takes the new one.
    Any other error is raised as it is."""

    def on_inbound_frame(frame: Any) -> Any:
        try:
            return on_frame(frame)
        except Exception as exc:
            frame_type, channel, payload = frame
            if frame_type != CONTENT_HEADER_FRAME or _readable(payload):
                raise
            return on_frame((frame_type, channel, _marked_header(payload, exc)))

    return on_inbound_frame


def _readable(payload: bytes) -> bool:
    """Whether the properties of the content header `payload` decode."""
    try:
        decode_properties_basic(payload, 12)  # after class, weight and body size
    except Exception:
        return False
    return True


def _marked_header(payload: bytes, error: Exception) -> bytes:
    """The content header `payload` (its class and body size kept) with its properties
    replaced by the UNREADABLE_PROPERTIES header saying `error`."""
    reason = f"{type(error).__name__}: {error}"[:UNREADABLE_REASON_CHARS]
    table = dumps("F", ({UNREADABLE_PROPERTIES: reason},))
    return payload[:12] + struct.pack(">H", 0x2000) + table  # 0x2000: headers alone


def unreadable_properties(headers: Any) -> str | None:
    """Why py-amqp could not read the properties of a delivery with application
    `headers` (`mark_unreadable_properties`), or None when it could."""
    if not isinstance(headers, dict):
        return None
    reason = headers.get(UNREADABLE_PROPERTIES)
    return None if reason is None else str(reason)


def queue_depths(broker_url: str, queues: Sequence[str], timeout_s: float) -> list[int]:
    """The messages ready in each of `queues` on RabbitMQ at `broker_url` (a passive
    declare; those delivered and not yet acknowledged are not counted), 0 for a queue
    not declared yet; connecting waits `timeout_s` at most."""
    depths = []
    with Connection(broker_url, connect_timeout=timeout_s) as connection:
        connection.ensure_connection(max_retries=1)
        for queue in queues:
            channel: Any = connection.channel()  # py-amqp's Channel (kombu types it StdChannel)
            try:
                ok = channel.queue_declare(queue, passive=True)
                depth = int(ok.message_count)
            except connection.channel_errors:  # NOT_FOUND: no worker or relay declared it
                depth = 0
            finally:
                with contextlib.suppress(Exception):
                    channel.close()
            depths.append(depth)
    return depths
