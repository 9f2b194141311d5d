"""A RabbitMQ delivery whose properties py-amqp cannot read, and the io intake's
connection: the message is dropped, never read again and again (by the worker's Celery
consumer too); a connection that drops as soon as it opens is made again after a wait,
longer each time."""

from __future__ import annotations

import itertools
import struct
from types import SimpleNamespace
from typing import Any

import amqp
import pytest
from amqp.basic_message import Message
from amqp.method_framing import frame_handler
from celery.worker.consumer import Consumer as CeleryConsumer
from kombu.transport import pyamqp

from toolfleet.shared.celery_wire.consumer import Consumer
from toolfleet.shared.celery_wire.rabbitmq import (
    UNREADABLE_PROPERTIES,
    _reading_unreadable,
    unreadable_properties,
)
from toolfleet.workers.intake import amqp_source
from toolfleet.workers.intake.amqp_inbox import AmqpTaker, Inbox
from toolfleet.workers.intake.amqp_source import RECONNECT_S, AmqpSource

DELIVER = struct.pack(">HH", 60, 60)  # Basic.Deliver: py-amqp reads its arguments later
NOT_UTF8 = b"\xff\xfe"


def header(body_size: int, flags: int, properties: bytes) -> bytes:
    """A content header frame's payload: class Basic, the body's size, the properties."""
    return struct.pack(">HHQH", 60, 0, body_size, flags) + properties


def short(text: bytes) -> bytes:
    return struct.pack(">B", len(text)) + text


def delivery(channel: int, body: bytes, flags: int, properties: bytes) -> list[Any]:
    """The three frames of a delivery on `channel`."""
    return [
        (1, channel, DELIVER),
        (2, channel, header(len(body), flags, properties)),
        (3, channel, body),
    ]


class _Connection:
    bytes_recv = 0


def handler() -> tuple[Any, list[Message]]:
    """py-amqp's own frame handler, made readable-tolerant, and the messages it completes."""
    received: list[Message] = []

    def completed(channel: int, method: Any, args: Any, message: Message) -> None:
        received.append(message)

    return _reading_unreadable(frame_handler(_Connection(), completed)), received


@pytest.mark.parametrize(
    ("flags", "properties"),
    [
        (0x8000, short(NOT_UTF8)),  # content_type
        (0x0200, short(NOT_UTF8)),  # reply_to
        (0xC000, short(b"application/json") + short(NOT_UTF8)),  # content_encoding
        (0x2000, b"\x00\x00"),  # a headers table cut short
    ],
)
def test_a_delivery_whose_properties_do_not_read_comes_marked_and_the_next_as_it_is(
    flags: int, properties: bytes
) -> None:
    on_frame, received = handler()
    good = short(b"application/json")
    for frame in [*delivery(1, b"forged", flags, properties), *delivery(1, b"{}", 0x8000, good)]:
        on_frame(frame)

    forged, next_one = received
    assert forged.body == b"forged"
    reason = unreadable_properties(forged.headers)
    assert reason is not None and reason.split(":")[0] in {"UnicodeDecodeError", "error"}
    assert next_one.body == b"{}"
    assert next_one.properties == {"content_type": "application/json"}
    assert unreadable_properties(next_one.headers) is None


def test_py_amqp_alone_raises_and_cannot_read_the_next_frame() -> None:
    received: list[Message] = []
    on_frame = frame_handler(_Connection(), lambda *args: received.append(args[3]))
    method, bad_header, body = delivery(1, b"forged", 0x8000, short(NOT_UTF8))
    on_frame(method)
    with pytest.raises(UnicodeDecodeError):
        on_frame(bad_header)
    with pytest.raises(Exception, match="expecting type: 2"):
        on_frame(body)  # the connection is lost to it: only dropping it goes on
    assert received == []


def test_an_error_of_the_consumer_itself_is_raised_as_it_is() -> None:
    def failing(*_: Any) -> None:
        raise RuntimeError("the consumer's own")

    on_frame = _reading_unreadable(frame_handler(_Connection(), failing))
    method, good_header, _ = delivery(1, b"", 0x8000, short(b"application/json"))
    on_frame(method)
    with pytest.raises(RuntimeError, match="the consumer's own"):
        on_frame(good_header)  # bodyless: completed by its header


class _Delivered:
    """py-amqp's message as the inbox holds it."""

    def __init__(self, body: bytes, headers: dict[str, Any]) -> None:
        self.body = body
        self.headers = headers
        self.properties: dict[str, Any] = {"application_headers": headers}
        self.delivery_info = {"routing_key": "tools.io", "redelivered": False}


def test_the_taker_drops_a_marked_delivery_by_its_tag_saying_why() -> None:
    inbox = Inbox()
    inbox.put("1:7", _Delivered(b"forged", {UNREADABLE_PROPERTIES: "UnicodeDecodeError: bad"}))
    taken = AmqpTaker(inbox, "tools.io").take(10)
    assert taken.messages == []
    (dropped,) = taken.dropped
    assert dropped.tag == "1:7"
    assert "properties could not be read" in dropped.reason
    assert "UnicodeDecodeError: bad" in dropped.reason


class _Rejects:
    """A kombu channel that notes the messages it is told to drop."""

    def __init__(self) -> None:
        self.rejected: list[Any] = []

    def basic_reject(self, delivery_tag: Any, requeue: bool = False) -> None:
        self.rejected.append((delivery_tag, requeue))


def test_the_workers_celery_consumer_drops_a_marked_delivery_and_hands_on_the_next(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """As a prefork worker's consumer gets them from kombu: the forged message dropped
    before Celery reads it as a task, the next given to Celery's handler."""
    handed: list[Any] = []
    monkeypatch.setattr(CeleryConsumer, "create_task_handler", lambda *_: handed.append)
    consumer = object.__new__(Consumer)  # what the handler reads of it alone
    consumer.connection_errors = ()
    on_message = consumer.create_task_handler()
    on_frame, received = handler()
    good = short(b"application/json")
    for frame in [
        *delivery(1, b"forged", 0x8000, short(NOT_UTF8)),
        *delivery(1, b"{}", 0x8000, good),
    ]:
        on_frame(frame)
    channel = _Rejects()
    for tag, message in enumerate(received, 1):
        message.delivery_info = {"delivery_tag": tag}
        on_message(pyamqp.Message(message, channel=channel))

    assert channel.rejected == [(1, False)]  # no dead-letter exchange: dropped
    assert [m.body for m in handed] == [b"{}"]
    assert "dropped a message whose properties could not be read (UnicodeDecodeError" in (
        caplog.text
    )


def test_the_consumers_connection_marks_on_rabbitmq_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def on_frame(frame: Any) -> None:
        raise AssertionError("not read")

    rabbit: Any = object.__new__(amqp.Connection)  # py-amqp's, as connected
    rabbit.on_inbound_frame = on_frame
    other = SimpleNamespace(on_inbound_frame=on_frame)  # kombu's Redis transport, say
    consumer = object.__new__(Consumer)
    for connection in (rabbit, other):
        conn: Any = SimpleNamespace(connection=connection)
        monkeypatch.setattr(CeleryConsumer, "connection_for_read", lambda *_, c=conn, **__: c)
        assert consumer.connection_for_read() is conn

    assert rabbit.on_inbound_frame is not on_frame
    assert other.on_inbound_frame is on_frame


class _Stopping:
    """The source's stop event: records each wait; set once `stopped`."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.stopped = False

    def is_set(self) -> bool:
        return self.stopped

    def wait(self, timeout_s: float) -> bool:
        self.waits.append(timeout_s)
        return self.stopped


class _App:
    class conf:  # Celery's name for it
        broker_heartbeat = 0

    def connection_for_read(self, **_: Any) -> Any:
        return _Lost()


class _Lost:
    def collect(self) -> None:
        pass


def dropping_source(monkeypatch: pytest.MonkeyPatch, connections: int) -> _Stopping:
    """A source whose connections each drop as soon as they consume, stopped at the
    `connections`th: its stop event."""
    source = AmqpSource(_App(), [], 1, "test")  # type: ignore[arg-type]
    stopping = _Stopping()
    monkeypatch.setattr(source, "_stopping", stopping)
    opened: list[object] = []
    monkeypatch.setattr(source, "_open", lambda connection: opened.append(connection))

    def dropping(connection: Any, channel: Any) -> None:
        stopping.stopped = len(opened) >= connections
        raise UnicodeDecodeError("utf-8", NOT_UTF8, 0, 1, "invalid start byte")

    monkeypatch.setattr(source, "_consume", dropping)
    source._run()
    assert len(opened) == connections
    return stopping


def test_a_connection_that_drops_as_soon_as_it_opens_is_made_again_after_longer_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stopping = dropping_source(monkeypatch, connections=6)
    first, longest = RECONNECT_S
    assert stopping.waits == [first * 2**n for n in range(5)] + [longest]


def test_a_connection_that_lasted_is_made_again_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = itertools.count(0.0, amqp_source.STEADY_S)  # each connection lasts STEADY_S
    monkeypatch.setattr(amqp_source, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    stopping = dropping_source(monkeypatch, connections=3)
    assert stopping.waits == []  # made again at once, each time
