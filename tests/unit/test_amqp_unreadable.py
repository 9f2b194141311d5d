"""A RabbitMQ delivery whose properties py-amqp cannot read: the io intake drops it,
never reads it again and again."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from amqp.basic_message import Message
from amqp.method_framing import frame_handler

from toolfleet.shared.celery_wire.rabbitmq import (
    UNREADABLE_PROPERTIES,
    _reading_unreadable,
    unreadable_properties,
)
from toolfleet.workers.intake.amqp_inbox import AmqpTaker, Inbox

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
