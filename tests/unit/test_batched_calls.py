"""An io worker's coroutine calls admitted and concluded in batches: one round trip for a
batch's delivery counts, one for its results; each call's own outcome, whatever befalls
the others of its batch."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, NoReturn, cast

import fakeredis
import pytest
import redis
from celery import Celery
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.support import LocalTool, counted_round_trips
from tests.unit.test_delivery_guard import KEYS, SENT_AT, guarded_deps
from toolfleet.shared.celery_wire.parse import decode, decode_delivery
from toolfleet.shared.config import Settings
from toolfleet.shared.keys import session_key
from toolfleet.shared.messages import RESULT_FIELD, CallStatus, ToolCall, ToolResult
from toolfleet.shared.reporting import _POST as POST
from toolfleet.shared.reporting import Feed, Post
from toolfleet.shared.tools import ToolOptions
from toolfleet.workers.deliveries import _COUNT as COUNT
from toolfleet.workers.deliveries import DeliveryGuard
from toolfleet.workers.executor import Outcome, OutcomeOf
from toolfleet.workers.intake.gathering import Gatherer
from toolfleet.workers.intake.runner import MessageRequest, MessageRunner
from toolfleet.workers.tool_runs import Admitted, ToolRuns

S = session_key("app", "u", "s")

STREAM = "t:results:s"

SETTINGS = Settings(redis_url="redis://unused", key_prefix="t", max_deliveries=2)


class Flaky(Exception):
    """What the tool's retry_on names."""


class Retried(Exception):
    """What the test's retrier raises in place of Celery's Retry."""


async def fetch(n: int) -> dict[str, int]:
    """A coroutine tool."""
    return {"n": n}


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    client = fakeredis.FakeRedis()
    for script in (COUNT, POST):  # known, as on a server that ran them before
        client.script_load(script.text)
    return client


@pytest.fixture
def runs(client: fakeredis.FakeRedis) -> ToolRuns:
    return fetch_runs(client)


def fetch_runs(client: redis.Redis) -> ToolRuns:
    """The runs of the coroutine tool `fetch` on a worker whose Redis is `client`."""
    tool = LocalTool(fetch, options=ToolOptions(retry_on=(Flaky,), max_retries=1))
    return ToolRuns(tool, guarded_deps(client, SETTINGS), 60.0, "io")


def envelope(call_id: str) -> dict[str, Any]:
    call = ToolCall(
        call_id=call_id, tool="fetch", args={"n": 1}, session_id="s", app_name="app",
        user_id="u", invocation_id="inv", agent="a", reply_to=STREAM, dispatched_at=SENT_AT,
    )  # fmt: skip
    return call.model_dump(mode="json")


def request(retries: int = 0) -> SimpleNamespace:
    """What the intake reads of a message for admitting its call."""
    return SimpleNamespace(id="task", retries=retries, hostname="io@host")


def posted(client: fakeredis.FakeRedis) -> list[ToolResult]:
    return [
        ToolResult.model_validate_json(fields[RESULT_FIELD.encode()])
        for _, fields in client.xrange(STREAM)
    ]


def test_a_batch_is_admitted_with_one_round_trip_and_each_call_gets_its_own_answer(
    client: fakeredis.FakeRedis, runs: ToolRuns, caplog: pytest.LogCaptureFixture
) -> None:
    client.set(KEYS.closed(S, "closed"), 1)  # answered already (timed out in the queue)
    client.set(KEYS.deliveries("lost", 0, SENT_AT), 2)  # its worker died on both deliveries
    round_trips = counted_round_trips(client)
    calls = ["open", "closed", "lost", "malformed", "open2"]
    admissions = ToolRuns.admit_all(
        [(runs, request(), {"nope": 1} if c == "malformed" else envelope(c), None) for c in calls]
    )

    admitted = {c: a for c, (a, _) in zip(calls, admissions, strict=True)}
    assert [a.envelope.call_id for a in admitted.values() if a] == ["open", "open2"]
    assert [e for _, e in admissions] == [None] * 5
    # The four counts of well-formed calls together, then the lost call's answer.
    assert len(round_trips) == 2
    assert [(r.call_id, r.response["error_type"]) for r in posted(client)] == [
        ("lost", "WorkerLost")
    ]
    assert "rejected a malformed call envelope" in caplog.text
    assert "call closed (fetch) was answered before it started" in caplog.text


def test_a_lost_connection_fails_each_call_of_the_batch_and_admits_none() -> None:
    # Nothing listens on port 1; no retries, so the error comes at once.
    down = redis.Redis(port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    runs = fetch_runs(down)
    admissions = ToolRuns.admit_all([(runs, request(), envelope(c), None) for c in ("a", "b")])
    assert [a for a, _ in admissions] == [None, None]
    assert [type(e) for _, e in admissions] == [redis.ConnectionError] * 2


def test_a_batch_is_concluded_with_one_round_trip_and_each_call_gets_its_own_end(
    client: fakeredis.FakeRedis, runs: ToolRuns
) -> None:
    ok, flaky, again = (admitted(runs, c) for c in ("ok", "flaky", "again"))
    retried: list[tuple[float, Exception]] = []

    def retry(countdown: float, exc: Exception) -> NoReturn:
        retried.append((countdown, exc))
        raise Retried

    round_trips = counted_round_trips(client)
    errors = ToolRuns.conclude_all(
        [
            (runs, ok, outcome(ok), retry),
            (runs, flaky, outcome(flaky, Flaky("try again")), retry),
            (runs, again, outcome(again), retry),
        ]
    )

    assert [type(e) if e else None for e in errors] == [None, Retried, None]
    assert [(countdown, type(exc)) for countdown, exc in retried] == [(1.0, Flaky)]
    # The results', and the retry's mark, written before the retry is sent.
    assert len(round_trips) == 2
    assert [r.call_id for r in posted(client)] == ["ok", "again"]
    # Each final answer closed its call in the step that posted it.
    assert client.exists(KEYS.closed(S, "ok"), KEYS.closed(S, "again")) == 2


def test_a_result_that_cannot_be_posted_fails_its_call_alone(
    client: fakeredis.FakeRedis, runs: ToolRuns
) -> None:
    ok, broken = admitted(runs, "ok"), admitted(runs, "broken")
    broken = Admitted(
        broken.envelope.model_copy(update={"reply_to": "t:not-a-stream"}),
        None,
        broken.attempt,
        broken.worker,
    )
    client.set("t:not-a-stream", "a string")

    def retry(countdown: float, exc: Exception) -> NoReturn:
        raise AssertionError("nothing is retried")

    errors = ToolRuns.conclude_all(
        [(runs, broken, outcome(broken), retry), (runs, ok, outcome(ok), retry)]
    )

    assert isinstance(errors[0], redis.ResponseError) and "WRONGTYPE" in str(errors[0])
    assert errors[1] is None
    assert [r.call_id for r in posted(client)] == ["ok"]
    assert not client.exists(KEYS.closed(S, "broken"))  # not answered: it stays open


def test_posts_of_a_batch_go_in_one_round_trip_signed_and_on_the_feed(
    client: fakeredis.FakeRedis,
) -> None:
    from toolfleet.shared.reporting import ResultReporter
    from toolfleet.shared.signing import SIGNATURE_FIELD, ResultSigner, new_fleet_key

    reporter = ResultReporter(
        client, 100, ResultSigner(new_fleet_key()), feed=Feed("t:feed", "t:feed-count")
    )
    round_trips = counted_round_trips(client)
    results = [outcome(admitted_envelope(c)).result for c in ("a", "b")]
    ids = reporter.post_all([Post(STREAM, results[0], "t:closed-a"), Post(STREAM, results[1])])

    assert len(round_trips) == 1
    entries = client.xrange(STREAM)
    assert [i.decode() for i, _ in entries] == ids
    assert all(SIGNATURE_FIELD.encode() in fields for _, fields in entries)
    assert client.xlen("t:feed") == 2
    assert client.exists("t:closed-a") and not client.exists("t:closed-b")


def test_every_stream_a_batch_posts_to_gets_its_ttl(client: fakeredis.FakeRedis) -> None:
    """A stream's TTL is renewed once per run: each stream of a batch has one."""
    from toolfleet.shared.reporting import STREAM_TTL_S, ResultReporter

    reporter = ResultReporter(client, 100, feed=Feed("t:feed", "t:feed-count"))
    results = [outcome(admitted_envelope(c)).result for c in ("a", "b", "c")]
    other = "t:results:other"
    reporter.post_all([Post(STREAM, results[0]), Post(other, results[1]), Post(STREAM, results[2])])

    assert [client.xlen(STREAM), client.xlen(other)] == [2, 1]
    for stream in (STREAM, other):
        assert 0 < client.ttl(stream) <= STREAM_TTL_S


def test_a_post_that_fails_fails_alone_in_a_batch_larger_than_one_run(
    client: fakeredis.FakeRedis,
) -> None:
    from toolfleet.shared.reporting import POST_BATCH, ResultReporter

    reporter = ResultReporter(client, 10_000, feed=Feed("t:feed", "t:feed-count"))
    client.set("t:not-a-stream", "x")  # a post to it fails: WRONGTYPE
    n = POST_BATCH * 2 + 5
    results = [outcome(admitted_envelope(f"c{i}")).result for i in range(n)]
    broken = POST_BATCH + 3
    posts = [
        Post("t:not-a-stream" if i == broken else STREAM, r, f"t:closed-{i}")
        for i, r in enumerate(results)
    ]
    ids = reporter.post_all(posts)

    assert isinstance(ids[broken], redis.ResponseError)
    assert "WRONGTYPE" in str(ids[broken])
    posted = [i for i in ids if not isinstance(i, Exception)]
    assert len(posted) == n - 1
    assert [i.decode() for i, _ in client.xrange(STREAM)] == posted  # in order
    # Each on the feed, numbered in order, with its copy; each closed but the failed one.
    numbers = [int(f[b"n"]) for _, f in client.xrange("t:feed")]
    assert numbers == list(range(1, n))
    assert all(RESULT_FIELD.encode() in f for _, f in client.xrange("t:feed"))
    assert not client.exists(f"t:closed-{broken}")
    assert client.exists(f"t:closed-{n - 1}")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):  # alone: raised
        reporter.post("t:not-a-stream", results[0])


def test_a_call_run_alone_and_in_a_batch_posts_the_same_result_and_counts_once() -> None:
    """A Celery task's call (`ToolRuns.run`) is a batch of one: the same call, on a worker
    of its own each way, gets the same answer, its delivery counted once."""
    alone, batched = fakeredis.FakeRedis(), fakeredis.FakeRedis()
    call = envelope("c")
    fetch_runs(alone).run(cast(Any, SimpleNamespace(request=request())), call)

    runs = fetch_runs(batched)
    ((admission, error),) = ToolRuns.admit_all([(runs, request(), call, None)])
    assert admission is not None, error
    ended: Future[OutcomeOf] = Future()
    runs.start(admission, ended.set_result)

    def retry(countdown: float, exc: Exception) -> NoReturn:
        raise AssertionError("nothing is retried")

    concluded = ToolRuns.conclude_all([(runs, admission, ended.result(timeout=10), retry)])

    assert concluded == [None]
    answers = [posted(client) for client in (alone, batched)]
    assert [len(results) for results in answers] == [1, 1]
    timeless = {"started_at", "finished_at"}
    assert answers[0][0].model_dump(exclude=timeless) == answers[1][0].model_dump(exclude=timeless)
    for client in (alone, batched):
        assert client.get(KEYS.deliveries("c", 0, SENT_AT)) == b"1"
        assert client.exists(KEYS.closed(S, "c"))


def dead_claim(client: fakeredis.FakeRedis, call_id: str) -> None:
    """The claim of `call_id`'s first attempt left by a worker that died: renewed no more."""
    claim = f"{KEYS.deliveries(call_id, 0, SENT_AT)}:claimed"
    client.set(claim, "dead-worker", px=200)


def test_a_lone_redelivery_takes_a_dead_claim_over_where_a_first_delivery_does_not(
    client: fakeredis.FakeRedis,
) -> None:
    """With claims (a broker that may publish a call twice), a single call's redelivery
    flag reaches its count: a redelivered message runs once the claim of the delivery
    that ran lapsed (its worker died); a copy of the first does not."""
    guard = DeliveryGuard(client, KEYS, SETTINGS.max_deliveries, claims=True, lease_s=0.3)
    runs = ToolRuns(
        fetch_runs(client).tool,
        replace(guarded_deps(client, SETTINGS), deliveries=guard),
        60.0,
        "io",
    )
    first, again = request(), request()
    again.delivery_info = {"redelivered": True}

    assert runs.admit(first, envelope("c")) is not None
    assert runs.admit(first, envelope("c")) is None  # published twice: the copy is closed
    assert runs.admit(again, envelope("c")) is None  # so is one redelivered: the first runs
    dead_claim(client, "c")
    assert runs.admit(first, envelope("c")) is None
    assert runs.admit(again, envelope("c")) is not None
    assert client.get(KEYS.deliveries("c", 0, SENT_AT)) == b"2"


def test_in_a_batch_a_redelivery_takes_a_dead_claim_over_where_a_first_delivery_does_not(
    client: fakeredis.FakeRedis,
) -> None:
    """An io worker's batch off RabbitMQ: each message's redelivered flag, read from its
    delivery into the request the intake makes, reaches its count."""
    guard = DeliveryGuard(client, KEYS, SETTINGS.max_deliveries, claims=True, lease_s=0.3)
    deps = replace(guarded_deps(client, SETTINGS), deliveries=guard)
    runs = ToolRuns(fetch_runs(client).tool, deps, 60.0, "io")

    def delivered(tag: str, redelivered: bool) -> MessageRequest:
        body = json.dumps([[], {"call": envelope("c")}, {}])
        headers = {"task": "tool.fetch", "id": "task", "retries": 0}
        info = {"exchange": "", "routing_key": "tools.io", "redelivered": redelivered}
        message = decode_delivery(tag, body, headers, {"priority": 0}, info)
        return MessageRequest(message, "io@host")

    first, copy, again = delivered("1:1", False), delivered("1:2", False), delivered("2:1", True)
    batch = [(runs, request, envelope("c"), None) for request in (first, copy, again)]
    admissions = ToolRuns.admit_all(batch)

    assert admissions[0][0] is not None  # the first delivery claims the call
    assert admissions[1] == (None, None)  # published twice: the copy is closed
    assert admissions[2] == (None, None)  # so is one redelivered: the first runs
    dead_claim(client, "c")
    admissions = ToolRuns.admit_all(batch)
    assert [admitted for admitted, _ in admissions[:2]] == [None, None]
    redelivery = admissions[2][0]  # its worker died: counted and run
    assert redelivery is not None and redelivery.redelivered
    assert client.get(KEYS.deliveries("c", 0, SENT_AT)) == b"2"


def admitted(runs: ToolRuns, call_id: str) -> Admitted:
    (admission, error), *_ = ToolRuns.admit_all([(runs, request(), envelope(call_id), None)])
    assert admission is not None, error
    return admission


def admitted_envelope(call_id: str) -> Admitted:
    return Admitted(ToolCall.model_validate(envelope(call_id)), None, 1, "io@host")


def outcome(call: Admitted, error: Exception | None = None) -> Outcome:
    now = time.time()
    envelope = call.envelope
    result = ToolResult(
        call_id=envelope.call_id, tool=envelope.tool, session_id=envelope.session_id,
        invocation_id=envelope.invocation_id,
        status=CallStatus.ERROR if error else CallStatus.SUCCESS,
        response={"error": str(error)} if error else {"n": 1}, started_at=now, finished_at=now,
    )  # fmt: skip
    return Outcome(result, error)


# ---------------------------------------------------------------- the gatherer


class HeldSubmit:
    """Runs submitted work only when told: what a busy pool of intake threads does."""

    def __init__(self) -> None:
        self.queued: list[Callable[[], None]] = []

    def __call__(self, work: Callable[[], None]) -> None:
        self.queued.append(work)

    def run_next(self) -> None:
        self.queued.pop(0)()


def test_items_that_arrive_while_a_batch_waits_for_its_thread_join_it() -> None:
    submit, batches = HeldSubmit(), []
    gatherer = Gatherer(submit, batches.append, most=3)
    for item in range(2):
        gatherer.add(item)
    assert len(submit.queued) == 1  # one batch waits, however many items join it
    submit.run_next()
    gatherer.add(2)  # after the batch took its items: the next batch
    submit.run_next()
    assert batches == [[0, 1], [2]]
    assert submit.queued == []


def test_a_batch_takes_at_most_its_share_and_the_rest_wait_for_a_thread_of_their_own() -> None:
    submit, batches = HeldSubmit(), []
    gatherer = Gatherer(submit, batches.append, most=2)
    for item in range(5):
        gatherer.add(item)
    while submit.queued:
        submit.run_next()
    assert batches == [[0, 1], [2, 3], [4]]


def test_a_failing_batch_is_logged_and_the_next_ones_are_still_handled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    submit, handled = HeldSubmit(), []

    def handle(batch: list[int]) -> None:
        if batch == [0]:
            raise ValueError("a bug")
        handled.append(batch)

    gatherer = Gatherer(submit, handle, most=10)
    gatherer.add(0)
    with caplog.at_level(logging.ERROR):
        submit.run_next()
    gatherer.add(1)
    submit.run_next()
    assert handled == [[1]]
    assert "handling a batch of 1 failed" in caplog.text


def test_items_added_from_many_threads_are_each_handled_once() -> None:
    handled: list[int] = []
    lock = threading.Lock()
    all_handled = threading.Event()

    def handle(batch: list[int]) -> None:
        with lock:
            handled.extend(batch)
            if len(handled) >= 800:
                all_handled.set()

    def submit(work: Callable[[], None]) -> None:
        threading.Thread(target=work).start()

    gatherer = Gatherer(submit, handle, most=7)
    adders = [
        threading.Thread(target=lambda n=n: [gatherer.add(n * 100 + i) for i in range(100)])
        for n in range(8)
    ]
    for adder in adders:
        adder.start()
    for adder in adders:
        adder.join()
    assert all_handled.wait(10), f"{len(handled)} of 800 items handled"
    assert sorted(handled) == [n * 100 + i for n in range(8) for i in range(100)]


# ---------------------------------------------------------------- the runner


class BrokenEvents:
    """A task-event dispatcher whose every send fails (its connection is gone)."""

    on = True

    def send(self, *args: Any, **kwargs: Any) -> None:
        raise ConnectionError("the events connection is gone")

    def send_made(self, *args: Any, **kwargs: Any) -> None:
        raise ConnectionError("the events connection is gone")


def test_failing_task_events_stop_no_message_of_a_batch_from_being_acknowledged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = Celery("runner-test", set_as_current=False)
    ran: list[int] = []

    def noted(n: int) -> None:
        ran.append(n)

    app.task(name="noted")(noted)
    acked: list[str] = []
    runner = MessageRunner(app, "io@host", acked.append, lambda step: step(), None)
    object.__setattr__(runner, "events", BrokenEvents())
    done: list[str] = []
    batch = [decode(task_message("noted", f"tag-{n}", n)) for n in range(3)]

    runner.run([(m, lambda tag=m.tag: done.append(tag)) for m in batch])

    assert ran == [0, 1, 2]
    assert acked == done == ["tag-0", "tag-1", "tag-2"]
    assert "sending Flower's task-started event of task task-tag-1 failed" in caplog.text


class SwitchedEvents:
    """Task events that are wanted while `on` is set; records what it is sent."""

    def __init__(self) -> None:
        self.on = False
        self.sent: list[tuple[str, str]] = []

    def send(self, kind: str, **fields: Any) -> None:
        self.sent.append((kind, fields["uuid"]))

    def send_made(self, kind: str, make: Callable[[], dict[str, Any]]) -> None:
        self.send(kind, **make())


def test_the_runner_makes_no_task_event_while_none_is_wanted() -> None:
    app = Celery("runner-test", set_as_current=False)

    def counted(n: int) -> None:
        pass

    app.task(name="counted")(counted)
    runner = MessageRunner(app, "io@host", lambda tag: None, lambda step: step(), None)
    events = SwitchedEvents()
    object.__setattr__(runner, "events", events)
    quiet, heard = (decode(task_message("counted", tag, 1)) for tag in ("quiet", "heard"))

    runner.received(quiet)
    runner.run([(quiet, lambda: None)])
    events.on = True  # a monitor asked (Celery's enable_events)
    runner.received(heard)
    runner.run([(heard, lambda: None)])

    assert events.sent == [
        ("task-received", "task-heard"),
        ("task-started", "task-heard"),
        ("task-succeeded", "task-heard"),
    ]


def task_message(task: str, tag: str, *args: Any) -> str:
    """A Celery protocol 2 message as kombu's Redis transport stores it."""
    body = json.dumps([list(args), {}, {}]).encode()
    return json.dumps(
        {
            "body": base64.b64encode(body).decode(),
            "content-type": "application/json",
            "headers": {"task": task, "id": f"task-{tag}"},
            "properties": {"body_encoding": "base64", "delivery_tag": tag},
        }
    )


def test_a_retried_exception_quoting_a_secret_reaches_celery_masked(
    client: fakeredis.FakeRedis, runs: ToolRuns
) -> None:
    """What Celery logs of a retry and Flower shows (`task-retried`) is the exception
    given to `retry`: its message holds no secret of the call's."""
    flaky = admitted(runs, "flaky")
    secret = "sk-live-4242"
    flaky = replace(flaky, envelope=flaky.envelope.model_copy(update={"args": {"api_key": secret}}))
    retried: list[Exception] = []

    def retry(countdown: float, exc: Exception) -> NoReturn:
        retried.append(exc)
        raise Retried

    error = Flaky(f"GET /v1?key={secret}: 503")
    [raised] = ToolRuns.conclude_all([(runs, flaky, outcome(flaky, error), retry)])

    assert isinstance(raised, Retried)
    [shown] = retried
    assert secret not in str(shown) and str(shown) == "Flaky: GET /v1?key=***: 503"
