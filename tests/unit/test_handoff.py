"""A call of a tool its worker lacks is handed on to another live worker of its pool that
registered it, and answered ToolNotRegisteredError only when none did, when it expired,
when it was handed on too long or when the registry cannot be read."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import fakeredis
import pytest
import redis
from celery import Celery
from kombu import Message

from tests.unit.test_call_signing import (
    KEY,
    SIGNER,
    envelope,
    forgeries,
    message,
    posted,
    signed,
)
from toolfleet.shared.celery_wire.consumer import Consumer
from toolfleet.shared.celery_wire.parse import decode
from toolfleet.shared.keys import Keys
from toolfleet.shared.messages import ToolCall
from toolfleet.shared.reporting import ResultReporter
from toolfleet.shared.signing import ResultSigner
from toolfleet.workers.handoff import (
    HANDED_ON_SINCE,
    HANDED_ON_TIMES,
    Decision,
    HandOff,
    Outcome,
    Resend,
    decide,
    kombu_publisher,
    resend_of_received,
    resend_of_taken,
)
from toolfleet.workers.intake.runner import MessageRunner
from toolfleet.workers.unregistered import answer_unregistered, install_unregistered_answer

KEYS = Keys("t")
ME = "old@a"
QUEUE = "tools.p"
WAIT_S = 10.0


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def beat(
    client: redis.Redis,
    hostname: str,
    pools: list[str],
    tools: list[str] | None,
    tool_pools: dict[str, str] | None = None,
) -> None:
    """A live worker's heartbeat record, as workers/heartbeat.py writes it."""
    record: dict[str, Any] = {"hostname": hostname, "pools": pools, "pid": 1, "started_at": 0.0}
    if tools is not None:
        record["tools"] = tools
    if tool_pools is not None:
        record["tool_pools"] = tool_pools
    client.set(KEYS.worker(hostname), json.dumps(record))
    client.zadd(KEYS.workers(), {hostname: time.time() + 30})


def resend(**headers: Any) -> Resend:
    return Resend(QUEUE, b"[[], {}, {}]", {"task": "tool.transfer", "id": "t1", **headers})


def decided(
    client: redis.Redis, sent: Resend | None = None, call: ToolCall | None = None
) -> Decision:
    return decide(client, KEYS, call or envelope(), sent or resend(), ME, time.time())


# ---------------------------------------------------------------- who has the tool


def test_a_call_is_handed_on_when_another_live_worker_of_its_pool_registered_the_tool(
    client: fakeredis.FakeRedis,
) -> None:
    beat(client, ME, ["p"], ["other"])
    beat(client, "new@b", ["p"], ["other", "transfer"])
    beat(client, "elsewhere@c", ["q"], ["transfer"])  # another pool's worker
    beat(client, "routed@d", ["p", "q"], ["transfer"], {"transfer": "q"})  # its calls go on q
    beat(client, "older@e", ["p"], None)  # does not say which tools it has

    assert decided(client) == Decision(Outcome.HAND_ON, holders=("new@b",))


def test_a_call_no_other_live_worker_of_its_pool_has_is_answered(
    client: fakeredis.FakeRedis,
) -> None:
    beat(client, ME, ["p"], ["other"])
    beat(client, "same@b", ["p"], ["other"])
    beat(client, "elsewhere@c", ["q"], ["transfer"])

    decision = decided(client)

    assert decision.outcome is Outcome.ANSWER
    assert decision.reason == "no other live worker of pool p has it"


def test_a_message_of_a_pool_this_worker_does_not_serve_is_answered_not_moved(
    client: fakeredis.FakeRedis,
) -> None:
    """A routing key naming another pool (forged, or a stale record) moves nothing onto
    that pool's queue, though a worker of that pool has the tool."""
    beat(client, ME, ["q"], ["other"])
    beat(client, "new@b", ["p"], ["transfer"])

    assert decided(client).outcome is Outcome.ANSWER


def test_a_worker_whose_own_record_is_gone_answers(client: fakeredis.FakeRedis) -> None:
    beat(client, "new@b", ["p"], ["transfer"])

    assert decided(client).outcome is Outcome.ANSWER


def test_a_closed_call_is_neither_handed_on_nor_answered(client: fakeredis.FakeRedis) -> None:
    beat(client, ME, ["p"], [])
    beat(client, "new@b", ["p"], ["transfer"])
    call = envelope()
    client.set(KEYS.closed(call.session_key, call.call_id), 1)

    assert decided(client, call=call).outcome is Outcome.CLOSED


# ---------------------------------------------------------------- bounds


def test_a_message_handed_on_for_the_bound_already_is_answered(
    client: fakeredis.FakeRedis,
) -> None:
    beat(client, ME, ["p"], [])
    beat(client, "new@b", ["p"], ["transfer"])
    now = time.time()

    late = decide(client, KEYS, envelope(), resend(**{HANDED_ON_SINCE: now - 31}), ME, now)
    within = decide(client, KEYS, envelope(), resend(**{HANDED_ON_SINCE: now - 29}), ME, now)

    assert late == Decision(Outcome.ANSWER, reason="handed on for 30 s already")
    assert within.outcome is Outcome.HAND_ON


# Ids of their own: a time in an id would differ between the processes that collect them.
@pytest.mark.parametrize(
    "forged",
    [time.time() + 3600, float("nan"), "soon", True],
    ids=["an-hour-ahead", "nan", "soon", "true"],
)
def test_a_first_hand_on_time_no_worker_wrote_counts_from_now(forged: object) -> None:
    """A message cannot circulate forever by a header saying it was first handed on in
    the future: the bound counts from this worker's clock."""
    now = time.time()
    again = resend(**{HANDED_ON_SINCE: forged, HANDED_ON_TIMES: "x"}).handed_on(now)

    assert again.headers[HANDED_ON_SINCE] == now and again.headers[HANDED_ON_TIMES] == 1
    assert again.handed_on(now + 31).headers[HANDED_ON_SINCE] == now  # kept from the first


def test_an_expired_message_is_answered(client: fakeredis.FakeRedis) -> None:
    beat(client, ME, ["p"], [])
    beat(client, "new@b", ["p"], ["transfer"])

    decision = decided(client, resend(expires="2000-01-01T00:00:00+00:00"))

    assert decision == Decision(Outcome.ANSWER, reason="its message expired")


class BrokenRedis(fakeredis.FakeRedis):
    def execute_command(self, *args: Any, **options: Any) -> Any:
        raise redis.ConnectionError("Redis is away")


def test_a_redis_error_reading_the_registry_is_logged_and_the_call_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    decision = decided(BrokenRedis())

    assert decision.outcome is Outcome.ANSWER
    assert "could not read the live workers of pool p: Redis is away" in caplog.text


# ---------------------------------------------------------------- handing on


class Published:
    """A publisher that records what it published, or fails."""

    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.sent: list[Resend] = []
        self.arrived = threading.Event()

    def __call__(self, sent: Resend) -> None:
        self.sent.append(sent)
        self.arrived.set()
        if self.fails:
            raise ConnectionError("broker away")


def reporter(client: redis.Redis) -> ResultReporter:
    return ResultReporter(client, 1000, ResultSigner(KEY))


def hand_over(client: fakeredis.FakeRedis, hand_off: HandOff, kwargs: dict[str, Any]) -> None:
    sent = (kwargs.get("call"), kwargs.get("sig"))
    handing = (hand_off, resend())
    answer_unregistered(reporter(client), KEYS, SIGNER, "tool.transfer", sent, QUEUE, ME, handing)


def test_a_signed_call_is_published_again_after_the_delay_not_answered(
    client: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    beat(client, ME, ["p"], [])
    beat(client, "new@b", ["p"], ["transfer"])
    published = Published()
    hand_off = HandOff(client, KEYS, published, delay_s=0.05)

    hand_over(client, hand_off, signed(envelope(call_id="real")))

    assert published.arrived.wait(WAIT_S)
    (again,) = published.sent
    assert again.queue == QUEUE and again.headers[HANDED_ON_TIMES] == 1
    assert posted(client) == []  # the model is not told the tool does not exist
    assert "worker old@a has no tool 'transfer': call real handed on to pool p, where new@b" in (
        caplog.text
    )


def test_the_consumer_does_not_wait_for_the_delay(client: fakeredis.FakeRedis) -> None:
    beat(client, ME, ["p"], [])
    beat(client, "new@b", ["p"], ["transfer"])
    published = Published()
    hand_off = HandOff(client, KEYS, published, delay_s=3600)

    hand_over(client, hand_off, signed(envelope(call_id="real")))

    assert published.sent == []  # held, not published on this thread
    hand_off.flush()  # its delay cut short: what it holds goes now
    assert [r.headers[HANDED_ON_TIMES] for r in published.sent] == [1]


def test_a_call_that_cannot_be_published_again_is_answered(
    client: fakeredis.FakeRedis,
) -> None:
    beat(client, ME, ["p"], [])
    beat(client, "new@b", ["p"], ["transfer"])
    hand_off = HandOff(client, KEYS, Published(fails=True), delay_s=3600)

    hand_over(client, hand_off, signed(envelope(call_id="real")))
    assert posted(client) == []
    hand_off.flush()  # published on this thread: it fails, and the call is answered

    (answer,) = posted(client)
    assert answer.call_id == "real" and answer.response["error_type"] == "ToolNotRegisteredError"
    call = envelope(call_id="real")
    assert client.exists(KEYS.closed(call.session_key, call.call_id))


def test_a_forged_call_is_neither_handed_on_nor_answered(client: fakeredis.FakeRedis) -> None:
    beat(client, ME, ["p"], [])
    beat(client, "new@b", ["p"], ["transfer"])
    published = Published()
    hand_off = HandOff(client, KEYS, published, delay_s=0)

    for name, kwargs in forgeries().items():
        hand_over(client, hand_off, kwargs)
        hand_off.flush()
        assert published.sent == [] and posted(client) == [], name


def test_without_another_worker_having_the_tool_the_call_is_answered_at_once(
    client: fakeredis.FakeRedis,
) -> None:
    beat(client, ME, ["p"], [])
    published = Published()
    hand_off = HandOff(client, KEYS, published, delay_s=0)

    hand_over(client, hand_off, signed(envelope(call_id="real")))

    (answer,) = posted(client)
    assert answer.response["error_type"] == "ToolNotRegisteredError"
    hand_off.flush()
    assert published.sent == []


def test_a_full_hold_answers_rather_than_grows(client: fakeredis.FakeRedis) -> None:
    beat(client, ME, ["p"], [])
    beat(client, "new@b", ["p"], ["transfer"])
    hand_off = HandOff(client, KEYS, Published(), delay_s=3600, max_held=1)

    hand_over(client, hand_off, signed(envelope(call_id="first")))
    hand_over(client, hand_off, signed(envelope(call_id="second")))

    assert [a.call_id for a in posted(client)] == ["second"]


# ---------------------------------------------------------------- the messages


def test_an_intakes_message_is_published_again_with_its_call_and_headers() -> None:
    kwargs = signed(envelope(call_id="real"))
    taken = decode(message("tool.transfer", "tag-1", kwargs))

    again = resend_of_taken(taken, QUEUE)

    assert json.loads(again.body)[:2] == [[], kwargs]
    assert again.headers["id"] == "task-tag-1" and again.queue == QUEUE


def test_a_message_published_again_through_kombu_keeps_its_body_headers_and_queue() -> None:
    """kombu's in-memory transport stands for either broker: the same Producer.publish."""
    app = Celery("handoff-test", broker="memory://", set_as_current=False)
    kwargs = signed(envelope(call_id="real"))
    body = json.dumps([[], kwargs, {}]).encode()
    sent = Resend(
        "tools.memory", body, {"task": "tool.transfer", "id": "t1"}, properties={"priority": 3}
    )

    kombu_publisher(app).__call__(sent.handed_on(time.time()))

    with app.connection_for_read() as connection:
        queue = connection.SimpleQueue("tools.memory")
        received = queue.get(timeout=WAIT_S)
        again = resend_of_received(received, "tools.memory")
        received.ack()
        queue.close()
    assert again is not None and again.body == body
    assert again.headers["id"] == "t1" and again.headers[HANDED_ON_TIMES] == 1
    assert again.properties["priority"] == 3


def intake_runner(
    client: fakeredis.FakeRedis, hand_off: HandOff, log: list[str]
) -> tuple[MessageRunner, Any]:
    """An io worker's message runner whose acknowledgements go to `log`, the app answering
    and handing on unregistered calls; and a message of such a call, taken from QUEUE."""
    app = Celery("handoff-intake", set_as_current=False)
    install_unregistered_answer(app, reporter(client), KEYS, SIGNER, hand_off)
    runner = MessageRunner(
        app, "io@host", lambda tag: log.append(f"ack {tag}"), lambda s: s(), None
    )
    raw = json.loads(message("tool.transfer", "tag-1", signed(envelope(call_id="real"))))
    raw["properties"]["delivery_info"] = {"exchange": "", "routing_key": QUEUE}
    return runner, decode(json.dumps(raw))


class Logged(Published):
    """Publishes, noting each publish in a shared log."""

    def __init__(self, log: list[str], fails: bool = False) -> None:
        super().__init__(fails)
        self.log = log

    def __call__(self, sent: Resend) -> None:
        self.log.append("publish")
        super().__call__(sent)


def test_an_intake_acknowledges_a_message_handed_on_only_once_its_copy_is_out(
    client: fakeredis.FakeRedis,
) -> None:
    """A worker killed while the message waits for its delay leaves it unacknowledged:
    the broker's sweep delivers it again."""
    beat(client, "io@host", ["p"], [])
    beat(client, "new@b", ["p"], ["transfer"])
    log: list[str] = []
    hand_off = HandOff(client, KEYS, Logged(log), delay_s=3600)
    runner, taken = intake_runner(client, hand_off, log)
    ended: list[str] = []

    runner.run([(taken, lambda: ended.append("done"))])

    assert log == [] and ended == []  # held: neither published nor acknowledged yet
    hand_off.flush()  # its delay is over
    assert log == ["publish", "ack tag-1"] and ended == ["done"]
    assert posted(client) == []


def test_an_intake_acknowledges_a_message_it_answers_at_once(
    client: fakeredis.FakeRedis,
) -> None:
    beat(client, "io@host", ["p"], [])  # no other worker has the tool
    log: list[str] = []
    runner, taken = intake_runner(client, HandOff(client, KEYS, Logged(log), delay_s=3600), log)

    runner.run([(taken, lambda: None)])

    assert log == ["ack tag-1"]
    (answer,) = posted(client)
    assert answer.response["error_type"] == "ToolNotRegisteredError"


def test_a_held_message_that_cannot_be_published_is_answered_then_acknowledged(
    client: fakeredis.FakeRedis,
) -> None:
    beat(client, "io@host", ["p"], [])
    beat(client, "new@b", ["p"], ["transfer"])
    log: list[str] = []
    hand_off = HandOff(client, KEYS, Logged(log, fails=True), delay_s=3600)
    runner, taken = intake_runner(client, hand_off, log)
    runner.run([(taken, lambda: None)])

    hand_off.flush()

    assert log == ["publish", "ack tag-1"]
    (answer,) = posted(client)
    assert answer.call_id == "real" and answer.response["error_type"] == "ToolNotRegisteredError"


def test_an_intake_hands_a_message_on_through_the_signal(client: fakeredis.FakeRedis) -> None:
    """The io worker's intake sends the message with the signal: it is published again,
    acknowledged here, not answered."""
    beat(client, "io@host", ["p"], [])
    beat(client, "new@b", ["p"], ["transfer"])
    log: list[str] = []
    published = Logged(log)
    runner, taken = intake_runner(client, HandOff(client, KEYS, published, delay_s=0), log)
    acked = threading.Event()
    runner.run([(taken, acked.set)])

    assert acked.wait(WAIT_S)  # the hand-off's thread published it, then ended it
    assert log == ["publish", "ack tag-1"] and posted(client) == []
    assert published.sent[0].queue == QUEUE


# ---------------------------------------------------------------- Celery's consumer


class Channel:
    """A broker channel that notes each message it is told to drop; `gone`: one closed
    since, which fails to."""

    def __init__(self, log: list[str], gone: bool = False) -> None:
        self.log = log
        self.gone = gone

    def basic_reject(self, delivery_tag: str, requeue: bool = False) -> None:
        if self.gone:
            raise RuntimeError("channel closed")
        self.log.append(f"reject {delivery_tag}")


class Loop:
    """A consumer's event loop: what another thread asks it to call runs when `run` says."""

    def __init__(self) -> None:
        self.soon: list[Callable[[], None]] = []

    def call_soon(self, callback: Callable[..., None], *args: Any) -> None:
        self.soon.append(partial(callback, *args))

    def run(self) -> None:
        ready, self.soon = self.soon, []
        for callback in ready:
            callback()


class ConsumerState:
    """What a Celery consumer's `on_unknown_task` reads of it: worker ME's, on `hub`."""

    def __init__(self, app: Celery, hub: Loop | None) -> None:
        self.app = app
        self.hub = hub
        self.hostname = ME
        self.connection_errors: tuple[type[BaseException], ...] = ()
        self.event_dispatcher = None


def received(log: list[str], gone: bool = False) -> Message:
    """A message of an unregistered tool's call as Celery's consumer receives it."""
    body = json.dumps([[], signed(envelope(call_id="real")), {}]).encode()
    return Message(
        body=body,
        channel=Channel(log, gone),
        delivery_tag="tag-1",
        content_type="application/json",
        content_encoding="utf-8",
        headers={"task": "tool.transfer", "id": "task-tag-1"},
        properties={},
        delivery_info={"exchange": "", "routing_key": QUEUE},
    )


def consumer_receives(
    client: fakeredis.FakeRedis, hand_off: HandOff, log: list[str], loop: Loop | None
) -> Message:
    """Celery's consumer of worker ME, on `loop` (None: none), receives a message of an
    unregistered tool; its app answers and hands on such calls with `hand_off`."""
    app = Celery("handoff-consumer", set_as_current=False)
    install_unregistered_answer(app, reporter(client), KEYS, SIGNER, hand_off)
    message = received(log)
    consumer = cast(Any, ConsumerState(app, loop))
    Consumer.on_unknown_task(consumer, message.body, message, KeyError("tool.transfer"))
    return message


def handing_on(client: fakeredis.FakeRedis) -> tuple[HandOff, list[str]]:
    """A hand-off of worker ME, whose pool's worker new@b has the tool, that holds what it
    takes until told; and the log of what it publishes."""
    beat(client, ME, ["p"], [])
    beat(client, "new@b", ["p"], ["transfer"])
    log: list[str] = []
    return HandOff(client, KEYS, Logged(log), delay_s=3600), log


def test_a_consumer_drops_a_message_handed_on_only_once_its_copy_is_out(
    client: fakeredis.FakeRedis,
) -> None:
    """A prefork worker killed while the message waits for its delay leaves it
    unacknowledged: the broker delivers it again."""
    hand_off, log = handing_on(client)
    loop = Loop()

    message = consumer_receives(client, hand_off, log, loop)

    assert log == [] and not message.acknowledged  # held: neither published nor dropped
    hand_off.flush()  # its delay is over: the hand-off's thread would publish it now
    assert log == ["publish"]  # dropped on the consumer's own thread, not this one
    loop.run()
    assert log == ["publish", "reject tag-1"] and message.acknowledged
    assert posted(client) == []


def test_a_consumer_drops_a_message_it_answers_at_once(client: fakeredis.FakeRedis) -> None:
    beat(client, ME, ["p"], [])  # no other worker has the tool
    log: list[str] = []
    loop = Loop()

    consumer_receives(client, HandOff(client, KEYS, Logged(log), delay_s=3600), log, loop)

    assert log == ["reject tag-1"] and loop.soon == []
    (answer,) = posted(client)
    assert answer.response["error_type"] == "ToolNotRegisteredError"


def test_a_consumer_without_an_event_loop_drops_the_message_first(
    client: fakeredis.FakeRedis,
) -> None:
    """No loop runs on the consumer's thread to drop it later (a broker channel is not
    shared between threads): dropped before the signal, as Celery drops it."""
    hand_off, log = handing_on(client)

    consumer_receives(client, hand_off, log, None)
    hand_off.flush()

    assert log == ["reject tag-1", "publish"]


def test_a_stopped_worker_leaves_an_unacknowledged_message_to_the_broker(
    client: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """Its original goes back to the queue (a channel closed warmly gives back what it did
    not acknowledge): a copy published too would be a second message of the call."""
    hand_off, log = handing_on(client)
    loop = Loop()
    message = consumer_receives(client, hand_off, log, loop)

    hand_off.give_back()
    loop.run()

    assert log == [] and not message.acknowledged and posted(client) == []
    assert "call real not handed on: the worker stopped" in caplog.text


def test_a_stopped_worker_publishes_a_message_it_acknowledged_already(
    client: fakeredis.FakeRedis,
) -> None:
    hand_off, log = handing_on(client)
    consumer_receives(client, hand_off, log, None)  # dropped first: nothing else has it

    hand_off.give_back()

    assert log == ["reject tag-1", "publish"]


def test_a_message_whose_channel_is_gone_when_its_copy_is_out_is_left_to_the_broker(
    client: fakeredis.FakeRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """The consumer reconnected while the message was held: dropping it fails, and the
    error is logged, not raised into the consumer's loop (the broker gives the message
    back; the copy's delivery finds the first's claim)."""
    hand_off, log = handing_on(client)
    loop = Loop()
    message = consumer_receives(client, hand_off, log, loop)
    cast(Channel, message.channel).gone = True

    hand_off.flush()
    loop.run()

    assert log == ["publish"] and not message.acknowledged
    assert "could not drop the message of unregistered task id task-tag-1" in caplog.text


def test_a_forged_message_naming_no_task_is_dropped(client: fakeredis.FakeRedis) -> None:
    """No headers, and a body that is no protocol 1 message: logged and dropped, and the
    consumer goes on (nothing raised into it)."""
    hand_off, log = handing_on(client)
    app = Celery("handoff-consumer", set_as_current=False)
    install_unregistered_answer(app, reporter(client), KEYS, SIGNER, hand_off)
    forged = Message(
        body=b"\xff not json",
        channel=Channel(log),
        delivery_tag="tag-9",
        content_type="application/json",
        content_encoding="utf-8",
        headers={},
        properties={},
        delivery_info={"exchange": "", "routing_key": QUEUE},
    )
    consumer = cast(Any, ConsumerState(app, None))

    Consumer.on_unknown_task(consumer, None, forged, KeyError("?"))
    hand_off.flush()

    assert log == ["reject tag-9"] and forged.acknowledged and posted(client) == []
