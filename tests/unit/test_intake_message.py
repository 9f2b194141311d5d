"""The intake's reading of task messages and its concurrency slots."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from toolfleet.shared.celery_wire.layout import priority_lists
from toolfleet.shared.celery_wire.parse import (
    MalformedMessage,
    TaskMessage,
    decode,
    decode_delivery,
    tag_of,
)
from toolfleet.workers.intake.broker import supports_intake
from toolfleet.workers.intake.eta import EtaQueue
from toolfleet.workers.intake.in_flight import InFlight
from toolfleet.workers.intake.intake import Slots


def message(body: object = ([], {"call": {"call_id": "c1"}}, {}), **headers: object) -> str:
    return json.dumps(
        {
            "body": base64.b64encode(json.dumps(body).encode()).decode(),
            "content-type": "application/json",
            "headers": {"task": "tool.nap", "id": "task-1", **headers},
            "properties": {
                "body_encoding": "base64",
                "delivery_tag": "tag-1",
                "delivery_info": {"exchange": "", "routing_key": "tools.io"},
            },
        }
    )


def test_a_protocol_2_message_decodes_to_what_running_its_task_needs() -> None:
    decoded = decode(message(retries=2, eta="2026-12-01T10:00:00+00:00"))
    assert (decoded.tag, decoded.task, decoded.task_id) == ("tag-1", "tool.nap", "task-1")
    assert decoded.args == [] and decoded.kwargs == {"call": {"call_id": "c1"}}
    assert decoded.retries == 2
    assert decoded.eta() == datetime(2026, 12, 1, 10, tzinfo=UTC)
    assert decoded.expires() is None
    assert decoded.delivery_info == {"exchange": "", "routing_key": "tools.io"}


def test_an_eta_without_a_zone_is_utc_as_celery_writes_it() -> None:
    assert decode(message(eta="2026-12-01T10:00:00")).eta() == datetime(2026, 12, 1, 10, tzinfo=UTC)


def with_properties(**changed: object) -> str:
    """`message()` with its properties changed."""
    envelope = json.loads(message())
    envelope["properties"].update(changed)
    return json.dumps(envelope)


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("not json", "not a Celery protocol 2 task message"),
        (json.dumps({"headers": {}, "properties": {}}), "'body'"),
        (message(body={"task": "protocol 1"}), "not a Celery protocol 2 task message"),
        (json.dumps({**json.loads(message()), "content-type": "application/x-python"}), "JSON"),
        # Fields the intake reads of every message before it runs one: a forged value
        # is the message's problem, not the intake's.
        (message(retries="x"), "its retries header 'x' is not a count"),
        (message(retries=-1), "its retries header -1 is not a count"),
        (message(retries=[1]), r"its retries header \[1\] is not a count"),
        (with_properties(delivery_info="tools.io"), "its delivery_info is not a JSON object"),
        (json.dumps({**json.loads(message()), "headers": ["task"]}), "not JSON objects"),
    ],
)
def test_a_malformed_message_says_what_is_wrong(raw: str, why: str) -> None:
    with pytest.raises(MalformedMessage, match=why):
        decode(raw)


def test_the_tag_of_a_message_that_does_not_decode_is_still_found_to_ack_it() -> None:
    bad = json.loads(message(body="not a list"))
    assert tag_of(json.dumps(bad)) == "tag-1"
    assert tag_of("not json") is None


def test_a_message_nested_too_deep_to_parse_is_malformed_and_its_tag_still_found() -> None:
    deep = "[" * 3_000 + "]" * 3_000  # past the recursion json.loads can do
    outer = json.loads(message())
    body = f'[[], {{"call": {deep}}}, {{}}]'.encode()
    deep_body = json.dumps({**outer, "body": base64.b64encode(body).decode()})
    with pytest.raises(MalformedMessage, match=r"its body nests JSON .* more than 144 levels"):
        decode(deep_body)
    deep_outer = json.dumps({**outer, "headers": {**outer["headers"], "x": "?"}})
    deep_outer = deep_outer.replace('"?"', deep)
    with pytest.raises(MalformedMessage, match="the message nests JSON"):
        decode(deep_outer)
    assert tag_of(deep_outer) == "tag-1"  # acked, not redelivered forever


def test_priority_lists_are_kombus_names_highest_first() -> None:
    assert priority_lists("tools.io") == [
        "tools.io",
        "tools.io\x06\x163",
        "tools.io\x06\x166",
        "tools.io\x06\x169",
    ]


def test_slots_reserve_at_most_what_is_free_and_wait_for_a_release() -> None:
    slots = Slots(3)
    assert slots.reserve(2, 0) == 2
    assert slots.reserve(5, 0) == 1
    assert slots.reserve(1, 0) == 0  # full: after the timeout, none
    released = threading.Timer(0.05, slots.release)
    released.start()
    assert slots.reserve(4, 5) == 1  # woken by the release
    slots.release(3)
    idle = threading.Thread(target=slots.wait_idle)
    idle.start()
    idle.join(5)
    assert not idle.is_alive()


def test_held_messages_are_handed_over_in_eta_order_and_stop_returns_the_rest() -> None:
    handed: list[str] = []
    both = threading.Event()

    def due(message: TaskMessage) -> None:
        handed.append(message.task_id)
        if len(handed) == 2:
            both.set()

    queue = EtaQueue(due)
    queue.start()
    now = datetime.now(UTC)
    queue.hold(decode(message(id="later")), now + timedelta(seconds=0.2))
    queue.hold(decode(message(id="sooner")), now + timedelta(seconds=0.1))
    queue.hold(decode(message(id="tomorrow")), now + timedelta(days=1))
    assert both.wait(5)
    assert handed == ["sooner", "later"]
    assert [m.task_id for m in queue.stop()] == ["tomorrow"]


def test_held_messages_are_kept_taken_each_second_while_they_wait() -> None:
    """The broker is told they are still taken: past its visibility timeout it would
    deliver them again, to another worker, which would run them at their ETA too."""
    kept: list[list[str]] = []
    handed = threading.Event()
    twice = threading.Event()

    def keep(tags: Sequence[str]) -> None:
        kept.append(list(tags))
        if len(kept) == 2:
            twice.set()

    queue = EtaQueue(lambda message: handed.set(), keep=keep)
    queue.start()
    held = decode(message(id="soon"))
    queue.hold(held, datetime.now(UTC) + timedelta(seconds=60))
    queue.hold(decode(message(id="much later")), datetime.now(UTC) + timedelta(days=1))
    assert twice.wait(5)  # about a second apart
    assert kept[:2] == [[held.tag, held.tag]] * 2
    assert len(queue.stop()) == 2 and not handed.is_set()


@pytest.mark.parametrize(
    ("version", "supported"), [("6.0.16", False), ("6.2.0", True), ("7.2.4", True), ("10.0", True)]
)
def test_the_intake_needs_redis_6_2_for_its_non_popping_wait(version: str, supported: bool) -> None:
    class Server:
        def info(self, section: str) -> dict[str, str]:
            assert section == "server"
            return {"redis_version": version}

    assert supports_intake(Server()) is supported  # type: ignore[arg-type]


def delivery(
    body: bytes, *, retries: int = 0, content_type: str = "application/json"
) -> TaskMessage:
    """A RabbitMQ delivery of task-1 (as py-amqp reads it: body, application headers,
    basic properties and delivery info), redelivered."""
    headers = {"task": "tool.nap", "id": "task-1", "retries": retries}
    properties = {"content_type": content_type, "correlation_id": "task-1", "priority": 0}
    info = {"exchange": "", "routing_key": "tools.io", "redelivered": True, "delivery_tag": 7}
    return decode_delivery("1:7", body, headers, properties, info)


def test_a_rabbitmq_delivery_decodes_with_the_delivery_info_of_celerys_request() -> None:
    decoded = delivery(json.dumps([[], {"call": {"call_id": "c1"}}, {}]).encode())
    assert (decoded.tag, decoded.task, decoded.task_id) == ("1:7", "tool.nap", "task-1")
    assert decoded.kwargs == {"call": {"call_id": "c1"}} and decoded.retries == 0
    assert decoded.delivery_info == {
        "exchange": "",
        "routing_key": "tools.io",
        "priority": 0,
        "redelivered": True,  # a redelivery is counted, not claimed as a first delivery
    }
    assert decoded.properties["correlation_id"] == "task-1"


@pytest.mark.parametrize(
    ("body", "content_type", "why"),
    [
        (b"\xff not json", "application/json", "not a Celery protocol 2 task message"),
        (b"[[], {}]", "application/json", "not a Celery protocol 2 task message"),
        (b"[[], {}, {}]", "application/x-python-serialize", "is not JSON"),
    ],
)
def test_a_malformed_delivery_says_what_is_wrong(body: bytes, content_type: str, why: str) -> None:
    with pytest.raises(MalformedMessage, match=why):
        delivery(body, content_type=content_type)


def test_a_copy_of_a_running_message_waits_for_it_and_a_retry_does_not() -> None:
    body = json.dumps([[], {}, {}]).encode()
    first, copy, retry = delivery(body), delivery(body), delivery(body, retries=1)
    in_flight = InFlight()
    assert in_flight.enter(first)
    assert not in_flight.enter(copy)  # delivered again while the first runs
    assert in_flight.enter(retry)  # another attempt: a message of its own
    assert in_flight.leave(first) == [copy]
    assert in_flight.enter(copy)  # runs now, alone
    assert in_flight.leave(copy) == [] and in_flight.leave(retry) == []
