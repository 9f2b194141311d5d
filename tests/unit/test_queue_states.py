"""Queue states read at scrape: every priority list counted, the oldest call's age from
its envelope, and a forged tail message ageing nothing."""

from __future__ import annotations

import base64
import json
import time

import fakeredis

from toolfleet.orchestrator.fleet.dispatch import CeleryPublisher
from toolfleet.orchestrator.fleet.queues import dispatched_at, priority_queues, queue_states
from toolfleet.shared.keys import queue_name
from toolfleet.shared.messages import ToolCall


def envelope(sent_at: float) -> str:
    call = ToolCall(
        call_id="c1", tool="t", args={}, session_id="s", app_name="a", user_id="u",
        invocation_id="i", agent="a", reply_to="r", dispatched_at=sent_at,
    )  # fmt: skip
    publisher = CeleryPublisher(fakeredis.FakeAsyncRedis())
    return publisher.encode(publisher.dispatch(call, queue_name("p")))


async def test_the_oldest_call_of_every_priority_list_counts(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    client = fake_redis
    base, *others = priority_queues("p")
    now = time.time()
    await client.lpush(base, envelope(now - 5), envelope(now - 1))  # tail: the 5 s old one
    await client.lpush(others[-1], envelope(now - 30))
    await client.lpush(queue_name("empty-neighbour"), envelope(now - 99))
    (state,) = await queue_states(client, ["p"])
    assert state.waiting == 3
    assert state.oldest_age_s is not None and 30 <= state.oldest_age_s < 40


async def test_a_pool_with_nothing_waiting_has_no_age(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    (state,) = await queue_states(fake_redis, ["idle"])
    assert (state.waiting, state.oldest_age_s) == (0, None)


def forged_time(value: object) -> str:
    """A message whose call says it was sent at `value`."""
    body = json.dumps([[], {"call": {"dispatched_at": value}}, {}]).encode()
    properties = {"body_encoding": "base64"}
    return json.dumps({"body": base64.b64encode(body).decode(), "properties": properties})


def test_a_forged_message_has_no_dispatch_time() -> None:
    assert dispatched_at(forged_time(7)) == 7.0
    assert dispatched_at(envelope(123.5)) == 123.5
    good = json.loads(envelope(1.0))
    forged: list[str | bytes] = [
        b"not json",
        json.dumps({"body": "!!!", "properties": {"body_encoding": "base64"}}),
        json.dumps({**good, "body": "W10="}),  # base64 of []
        forged_time(float("nan")),
        forged_time(True),
        forged_time("1.0"),
        json.dumps([1, 2, 3]),
        "[" * 100_000 + "]" * 100_000,  # past the JSON parser's depth
        json.dumps({"body": "[" * 100_000 + "]" * 100_000, "properties": {}}),
    ]
    assert [dispatched_at(raw) for raw in forged] == [None] * len(forged)
