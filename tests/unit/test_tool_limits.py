"""Fleet-wide per-tool limits: the Lua scripts (slots leased in a sorted set, starts in a
sliding window) and the gate a worker's call passes, on fakeredis with Lua."""

from __future__ import annotations

import asyncio
import io
import threading
import time
from typing import Any

import fakeredis
import pytest
import redis
from celery import Celery
from celery.exceptions import SoftTimeLimitExceeded

from tests.support import LocalTool
from toolfleet.orchestrator.cli.embedded import wait_for
from toolfleet.orchestrator.cli.progress import LiveProgress
from toolfleet.orchestrator.loop.invocation import CallsDispatched
from toolfleet.shared.completions import Completions
from toolfleet.shared.config import Settings
from toolfleet.shared.context import ToolServices
from toolfleet.shared.errors import ToolDefinitionError
from toolfleet.shared.keys import Keys, session_key, task_name
from toolfleet.shared.messages import RESULT_FIELD, RunningCall, ToolCall, ToolResult
from toolfleet.shared.reporting import ResultReporter
from toolfleet.shared.tool_limits import (
    ACQUIRE,
    CLOSED,
    RENEW,
    START,
    Leases,
    Rate,
    parse_rate,
)
from toolfleet.shared.tools import FunctionTool, ToolOptions, tool
from toolfleet.workers.limits import Gate
from toolfleet.workers.tasks import register_tool_tasks
from toolfleet.workers.tool_runs import ToolRuns, ToolTaskDeps

KEYS = Keys("t")
S = session_key("app", "u", "s")
SLOTS = KEYS.tool_slots("t")
STARTS = KEYS.tool_starts("t")
LEASE_MS = 60_000


@pytest.fixture
def client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


def acquire(client: fakeredis.FakeRedis, holder: str, limit: int, call_id: str = "c1") -> int:
    closed = KEYS.closed(S, call_id)
    return int(ACQUIRE.run_sync(client, 2, SLOTS, closed, holder, limit, LEASE_MS))


def start(client: fakeredis.FakeRedis, member: str, count: int, period_ms: int) -> int:
    closed = KEYS.closed(S, "c1")
    return int(START.run_sync(client, 2, STARTS, closed, count, period_ms, member))


def test_slots_are_given_up_to_the_limit_and_again_once_one_is_released(
    client: fakeredis.FakeRedis,
) -> None:
    assert [acquire(client, h, 2) for h in ("a", "b", "c")] == [1, 1, 0]
    assert acquire(client, "a", 2) == 1  # a holder asking again keeps its own slot
    client.zrem(SLOTS, "a")
    assert acquire(client, "c", 2) == 1
    assert {m.decode() for m in client.zrange(SLOTS, 0, -1)} == {"b", "c"}
    assert 0 < client.pttl(SLOTS) <= LEASE_MS  # the key goes with its last lease


def test_an_expired_holder_is_dropped_before_the_count(client: fakeredis.FakeRedis) -> None:
    assert acquire(client, "dead", 1) == 1
    assert acquire(client, "next", 1) == 0
    client.zadd(SLOTS, {"dead": 1})  # its lease ended long ago: its worker stopped renewing
    assert acquire(client, "next", 1) == 1
    assert client.zrange(SLOTS, 0, -1) == [b"next"]


def test_a_closed_call_takes_no_slot_and_no_start(client: fakeredis.FakeRedis) -> None:
    client.set(KEYS.closed(S, "c1"), 1)
    assert acquire(client, "a", 5) == CLOSED
    assert start(client, "m", 5, 1000) == CLOSED
    assert not client.exists(SLOTS) and not client.exists(STARTS)


def test_renew_extends_a_held_lease_and_reports_a_lost_one(client: fakeredis.FakeRedis) -> None:
    acquire(client, "a", 1)
    client.zadd(SLOTS, {"a": 5})  # about to end
    assert RENEW.run_sync(client, 1, SLOTS, "a", LEASE_MS) == 1
    expiry = client.zscore(SLOTS, "a")
    assert expiry is not None and expiry > time.time() * 1000
    assert RENEW.run_sync(client, 1, SLOTS, "gone", LEASE_MS) == 0
    assert client.zscore(SLOTS, "gone") is None  # a lost slot is not taken back by renewing


def test_leases_renew_every_held_slot_and_drop_gives_it_back(client: fakeredis.FakeRedis) -> None:
    leases = Leases(client, lease_s=60)
    acquire(client, "a", 1)
    client.zadd(SLOTS, {"a": 5})
    leases.hold(SLOTS, "a")
    leases.renew_all()
    assert (client.zscore(SLOTS, "a") or 0) > time.time() * 1000
    leases.drop(SLOTS, "a")
    assert client.zscore(SLOTS, "a") is None


def test_starts_stay_within_the_rate_and_say_how_long_to_wait(client: fakeredis.FakeRedis) -> None:
    assert [start(client, m, 2, 10_000) for m in ("a", "b")] == [0, 0]
    wait_ms = start(client, "c", 2, 10_000)
    assert 0 < wait_ms <= 10_000
    assert client.zcard(STARTS) == 2  # a refused start is not counted
    client.zadd(STARTS, {"a": 1})  # the oldest start left the window
    assert start(client, "c", 2, 10_000) == 0


@pytest.mark.parametrize(
    ("text", "rate"),
    [("100/m", Rate(100, 60.0)), ("5/s", Rate(5, 1.0)), ("5/10s", Rate(5, 10.0))],
)
def test_rates_are_parsed(text: str, rate: Rate) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["100", "0/m", "5/d", "x/s", "5/0s", "-1/s"])
def test_a_bad_rate_says_how_to_write_one(text: str) -> None:
    with pytest.raises(ValueError, match="100/m"):
        parse_rate(text)


def limited_fn() -> str:
    """A tool with limits."""
    return "ok"


@pytest.mark.parametrize(
    "options", [{"max_concurrency": 0}, {"max_concurrency": True}, {"rate_limit": "fast"}]
)
def test_the_decorator_refuses_bad_limits(options: dict[str, Any]) -> None:
    with pytest.raises(ToolDefinitionError, match="limited_fn"):
        tool(limited_fn, **options)


def test_the_decorator_keeps_the_limits() -> None:
    limited = tool(limited_fn, max_concurrency=3, rate_limit="10/s")
    assert limited.options.max_concurrency == 3 and limited.options.rate_limit == "10/s"
    assert limited.options.limited and not ToolOptions().limited


def call(call_id: str = "c1", tool_name: str = "t") -> ToolCall:
    return ToolCall(
        call_id=call_id, tool=tool_name, args={}, session_id="s", app_name="app", user_id="u",
        invocation_id="inv", agent="a", reply_to="t:results:s", dispatched_at=time.time(),
    )  # fmt: skip


def slow_tool(max_concurrency: int | None = 1, rate_limit: str | None = None) -> FunctionTool:
    options = ToolOptions(max_concurrency=max_concurrency, rate_limit=rate_limit)
    return LocalTool(limited_fn, "t", options)


def test_a_waiting_call_shows_it_and_gets_the_slot_once_it_is_given_back(
    client: fakeredis.FakeRedis,
) -> None:
    gate = Gate(client, KEYS, lease_s=60)
    first = gate.wait(slow_tool(), call("c1"), "w1")
    assert first is not None
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(gate.wait(slow_tool(), call("c2"), "w2")))
    waiter.start()
    # Its note is written when it waits.
    wait_for(lambda: client.hexists(KEYS.running(S), "c2"), 10, "the waiting call's note")
    note = RunningCall.model_validate_json(client.hget(KEYS.running(S), "c2") or b"")
    assert note.waiting_for == "a slot" and note.worker == "w2"
    assert got == []
    gate.end(first)
    waiter.join(10)
    (second,) = got
    assert second is not None and second.holder is not None
    assert client.zrange(SLOTS, 0, -1) == [second.holder.encode()]
    note = RunningCall.model_validate_json(client.hget(KEYS.running(S), "c2") or b"")
    assert note.waiting_for is None  # running now


def test_a_call_closed_while_it_waits_gets_no_slot(client: fakeredis.FakeRedis) -> None:
    gate = Gate(client, KEYS, lease_s=60)
    assert gate.wait(slow_tool(), call("c1"), "w") is not None
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(gate.wait(slow_tool(), call("c2"), "w")))
    waiter.start()
    wait_for(lambda: client.hexists(KEYS.running(S), "c2"), 10, "the call to wait")
    client.set(KEYS.closed(S, "c2"), 1)  # the orchestrator answered it (timed out)
    waiter.join(10)
    assert got == [None]
    assert client.zcard(SLOTS) == 1  # only the first call's


def test_a_rate_limited_call_closed_while_it_waits_gives_its_slot_back(
    client: fakeredis.FakeRedis,
) -> None:
    gate = Gate(client, KEYS, lease_s=60)
    limited = slow_tool(max_concurrency=2, rate_limit="1/h")
    first = gate.wait(limited, call("c1"), "w")
    assert first is not None
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(gate.wait(limited, call("c2"), "w")))
    waiter.start()
    # It holds a slot and waits for its start.
    wait_for(lambda: client.zcard(SLOTS) >= 2, 10, "the call to hold a slot")
    client.set(KEYS.closed(S, "c2"), 1)
    waiter.join(10)
    assert got == [None]
    assert client.zcard(SLOTS) == 1


def test_an_io_call_waiting_for_a_slot_does_not_hold_the_loop(client: fakeredis.FakeRedis) -> None:
    gate = Gate(client, KEYS, lease_s=60)
    first = gate.wait(slow_tool(), call("c1"), "w")
    assert first is not None

    async def both() -> list[str]:
        order: list[str] = []

        async def waiting() -> None:
            turn = await gate.wait_async(slow_tool(), call("c2"), "w")
            assert turn is not None
            order.append("c2 ran")

        async def other() -> None:
            await asyncio.sleep(0)  # ok: yields the loop once, to c2's waiting
            order.append("other ran")
            gate.end(first)  # while c2 waits on the same loop

        await asyncio.wait_for(asyncio.gather(waiting(), other()), 10)
        return order

    assert asyncio.run(both()) == ["other ran", "c2 ran"]


class _Failed(Exception):
    pass


def failing() -> str:
    """Fails."""
    raise _Failed("no")


# The tasks name their queue (celery deprecates the attribute for 6.0; the workers use it).
@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_task_gives_its_slot_back_when_its_tool_fails(client: fakeredis.FakeRedis) -> None:
    settings = Settings(redis_url="redis://unused", key_prefix="t")
    gate = Gate(client, KEYS, lease_s=60)
    deps = ToolTaskDeps(
        settings, ResultReporter(client, 1000), Completions(client, KEYS), ToolServices(),
        gate=gate,
    )  # fmt: skip
    app = Celery("limits-test", set_as_current=False)
    limited = LocalTool(failing, "t", ToolOptions(max_concurrency=1))
    register_tool_tasks(app, {"t": limited}, deps)
    for call_id in ("c1", "c2"):  # the second runs only if the first gave its slot back
        app.tasks[task_name("t")].apply(args=[call(call_id).model_dump(mode="json")])
    results = [
        ToolResult.model_validate_json(fields[RESULT_FIELD.encode()])
        for _, fields in client.xrange("t:results:s")
    ]
    assert [(r.call_id, r.response["error_type"]) for r in results] == [
        ("c1", "_Failed"),
        ("c2", "_Failed"),
    ]
    assert client.zcard(SLOTS) == 0


# The tasks name their queue (celery deprecates the attribute for 6.0; the workers use it).
@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_soft_time_limit_raised_as_the_wait_returns_gives_the_slot_back(
    client: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Celery's soft time limit is raised between any two bytecodes: here just after the
    wait took the slot, before its caller has the Turn. The slot must not stay held -
    renewed by this process for as long as it lives, no call of the tool would run
    anywhere again."""
    settings = Settings(redis_url="redis://unused", key_prefix="t")
    gate = Gate(client, KEYS, lease_s=60)
    waited = gate.wait

    def wait_then_interrupted(*args: Any, **kwargs: Any) -> Any:
        assert waited(*args, **kwargs) is not None  # the slot is taken
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(gate, "wait", wait_then_interrupted)
    deps = ToolTaskDeps(
        settings, ResultReporter(client, 1000), Completions(client, KEYS), ToolServices(),
        gate=gate,
    )  # fmt: skip
    app = Celery("limits-test", set_as_current=False)
    register_tool_tasks(app, {"t": slow_tool()}, deps)

    app.tasks[task_name("t")].apply(args=[call("c1").model_dump(mode="json")])

    (posted,) = [
        ToolResult.model_validate_json(fields[RESULT_FIELD.encode()])
        for _, fields in client.xrange("t:results:s")
    ]
    assert posted.call_id == "c1" and posted.response["status"] == "error"
    assert client.zcard(SLOTS) == 0
    assert gate._leases._held == {}  # not renewed either


def test_a_tool_without_limits_costs_no_round_trip(client: fakeredis.FakeRedis) -> None:
    settings = Settings(redis_url="redis://unused", key_prefix="t")
    deps = ToolTaskDeps(
        settings, ResultReporter(client, 1000), Completions(client, KEYS), ToolServices(),
        gate=Gate(client, KEYS, lease_s=60),
    )  # fmt: skip
    assert ToolRuns(LocalTool(limited_fn, "t"), deps, 0, "default")._gate() is None
    assert ToolRuns(slow_tool(), deps, 0, "default")._gate() is deps.gate


async def test_the_progress_line_counts_the_calls_waiting_for_a_slot(
    fake_redis: fakeredis.FakeAsyncRedis,
) -> None:
    progress = LiveProgress(io.StringIO(), fake_redis, KEYS, S, quiet_s=0)
    progress.follow(CallsDispatched("inv", [call("a"), call("b"), call("c")]))
    for call_id, waiting_for in (("a", "a slot"), ("b", "a slot"), ("c", None)):
        note = RunningCall(worker="w@h", pid=1, started_at=time.time(), waiting_for=waiting_for)
        await fake_redis.hset(KEYS.running(S), call_id, note.model_dump_json())
    line = await progress.line()
    assert line is not None
    assert "running: t on w@h pid 1" in line and line.endswith("; 2 waiting for a slot")


def test_a_held_slot_is_renewed_while_its_call_runs(client: fakeredis.FakeRedis) -> None:
    leases = Leases(client, lease_s=0.5)  # renewed every 0.1 s
    acquire(client, "long", 1)
    client.zadd(SLOTS, {"long": 5})  # as if its lease were about to end
    leases.hold(SLOTS, "long")
    wait_for(lambda: (client.zscore(SLOTS, "long") or 0) >= time.time() * 1000, 10, "the renewal")
    leases.drop(SLOTS, "long")
    assert acquire(client, "next", 1) == 1


def test_an_io_call_stopped_while_it_waits_gives_its_slot_back(
    client: fakeredis.FakeRedis,
) -> None:
    gate = Gate(client, KEYS, lease_s=60)
    limited = slow_tool(max_concurrency=2, rate_limit="1/h")
    assert gate.wait(limited, call("c1"), "w") is not None

    async def stopped() -> None:
        waiting = asyncio.ensure_future(gate.wait_async(limited, call("c2"), "w"))
        # It holds a slot and waits for its start, on this loop: wait in a thread.
        await asyncio.to_thread(wait_for, lambda: client.zcard(SLOTS) >= 2, 10, "a held slot")
        waiting.cancel()  # its time limit, or its session cancelled
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(stopped())
    assert client.zcard(SLOTS) == 1


# What a blocked tool waits for: set at its test's end.
_RELEASE = threading.Event()


def blocked() -> str:
    """Runs until its test ends."""
    _RELEASE.wait(30)
    return "done"


# The tasks name their queue (celery deprecates the attribute for 6.0; the workers use it).
@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_pool_threads_wait_for_a_slot_counts_toward_its_time_limit(
    client: fakeredis.FakeRedis,
) -> None:
    """On a pool thread (an io worker's sync tools, `-P threads`) no signal stops the
    call: the time it waited for its slot counts toward its limit, as on prefork (Celery's
    limit) and on the call loop. Else it runs a whole limit after it got its slot, holding
    the slot past the orchestrator's deadline for the call."""
    settings = Settings(redis_url="redis://unused", key_prefix="t")
    deps = ToolTaskDeps(
        settings, ResultReporter(client, 1000), Completions(client, KEYS), ToolServices(),
        gate=Gate(client, KEYS, lease_s=60),
    )  # fmt: skip
    app = Celery("limits-test", set_as_current=False)
    limited = LocalTool(blocked, "t", ToolOptions(max_concurrency=1, timeout_s=2.0))
    register_tool_tasks(app, {"t": limited}, deps)
    assert acquire(client, "other", 1) == 1  # another call's slot, given back in 1.5 s
    threading.Timer(1.5, lambda: client.zrem(SLOTS, "other")).start()
    task = app.tasks[task_name("t")]
    _RELEASE.clear()
    began = time.monotonic()
    # On a thread of its own, as a threads pool runs it: not the main thread.
    runner = threading.Thread(target=lambda: task.apply(args=[call().model_dump(mode="json")]))
    runner.start()
    try:
        wait_for(lambda: client.xlen("t:results:s") > 0, 10, "the call's answer")
        took = time.monotonic() - began
    finally:
        _RELEASE.set()
        runner.join(10)
    ((_, fields),) = client.xrange("t:results:s")
    result = ToolResult.model_validate_json(fields[RESULT_FIELD.encode()])
    assert result.response["error_type"] == "TimeoutError"
    assert took < 3.0, f"answered {took:.1f} s after the call started; its limit is 2 s"
    wait_for(lambda: client.zcard(SLOTS) == 0, 10, "its slot given back once the tool ends")


@pytest.mark.parametrize("on_loop", [False, True])
def test_a_redis_error_after_the_slot_is_taken_gives_it_back(
    client: fakeredis.FakeRedis, monkeypatch: pytest.MonkeyPatch, on_loop: bool
) -> None:
    """A call that waited takes its slot, then notes that it runs: a Redis error between
    the two fails the call, and must not leave its slot held - renewed by this process
    for as long as it lives, no call of the tool would run anywhere again."""
    gate = Gate(client, KEYS, lease_s=60)
    first = gate.wait(slow_tool(), call("c1"), "w")
    assert first is not None
    noted = gate._note

    def note(the_call: ToolCall, worker: str, waiting_for: str | None) -> None:
        if waiting_for is None:  # running now: Redis fails this one
            raise redis.ConnectionError("Connection reset by peer")
        noted(the_call, worker, waiting_for)

    monkeypatch.setattr(gate, "_note", note)
    errors: list[BaseException] = []

    def second() -> None:
        try:
            if on_loop:
                asyncio.run(gate.wait_async(slow_tool(), call("c2"), "w"))
            else:
                gate.wait(slow_tool(), call("c2"), "w")
        except redis.ConnectionError as exc:
            errors.append(exc)

    waiter = threading.Thread(target=second)
    waiter.start()
    wait_for(lambda: client.hexists(KEYS.running(S), "c2"), 10, "the second call to wait")
    gate.end(first)
    waiter.join(10)

    assert len(errors) == 1
    assert client.zcard(SLOTS) == 0
    assert gate._leases._held == {}  # not renewed either


# The tasks name their queue (celery deprecates the attribute for 6.0; the workers use it).
@pytest.mark.filterwarnings("ignore::celery.exceptions.CDeprecationWarning")
def test_a_pool_threads_wait_ends_at_its_time_limit_and_gives_its_slot_back(
    client: fakeredis.FakeRedis,
) -> None:
    """A call past its time limit while it waits on a pool thread (no signal stops it
    there), holding a slot while it waits for its rate limit: it is answered TimeoutError
    and gives the slot back, as on prefork and on the call loop - not held until the
    orchestrator, which may be down, closes the call."""
    settings = Settings(redis_url="redis://unused", key_prefix="t")
    deps = ToolTaskDeps(
        settings, ResultReporter(client, 1000), Completions(client, KEYS), ToolServices(),
        gate=Gate(client, KEYS, lease_s=60),
    )  # fmt: skip
    app = Celery("limits-test", set_as_current=False)
    options = ToolOptions(max_concurrency=2, rate_limit="1/h", timeout_s=1.0)
    register_tool_tasks(app, {"t": LocalTool(limited_fn, "t", options)}, deps)
    assert start(client, "earlier", 1, 3_600_000) == 0  # this hour's start is taken
    task = app.tasks[task_name("t")]
    runner = threading.Thread(
        target=lambda: task.apply(args=[call().model_dump(mode="json")]), daemon=True
    )
    runner.start()  # on a thread of its own, as a threads pool runs it
    wait_for(lambda: client.zcard(SLOTS) == 1, 10, "the call to hold a slot and wait")
    wait_for(lambda: client.xlen("t:results:s") > 0, 10, "the call's answer")
    runner.join(10)
    ((_, fields),) = client.xrange("t:results:s")
    result = ToolResult.model_validate_json(fields[RESULT_FIELD.encode()])
    assert result.response["error_type"] == "TimeoutError"
    assert client.zcard(SLOTS) == 0
